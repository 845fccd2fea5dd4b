import db from '@adonisjs/lucid/services/db'
import logger from '@adonisjs/core/services/logger'
import { tierPlan, type TierKey } from '#config/plans'
import {
  AgentNotRunningException,
  NotFoundException,
  ValidationException,
} from '#core/exceptions/api_exceptions'
import type Agent from '#agents/models/agent'
import { findAgent } from '#agents/services/agent_access'
import { runtimeSpecFor } from '#agents/services/runtime_spec'
import User from '#identity/models/user'
import runtime from '#runtime/services/runtime'
import type { SkillChange } from '#runtime/types'
import plugins from '#plugins/services/plugins'
import {
  catalogueSkill,
  skillCatalogue,
  type CatalogueSkill,
} from '#skills/services/skill_catalogue'

/** Spec "Skills state". */
export interface SkillsState {
  installed: string[]
  available: string[]
  tier: TierKey
  maxSkills: number
}

/** Statuses whose container must not be touched (CONTRACT.md: 409 AGENT_NOT_RUNNING). */
const NOT_RUNNING = new Set(['stopped', 'paused', 'error'])

/** Frameworks whose plugin names a skills folder (others cannot install any). */
function frameworkLoadsSkills(framework: string): boolean {
  try {
    return Boolean(plugins.framework(framework).skillsDir)
  } catch {
    return false
  }
}

/**
 * Whether a skill suits a framework: the frameworks a skill names are those
 * it was written and checked for; a framework no catalogue skill names (a
 * plugin added later) that loads AgentSkills folders gets every skill, the
 * format being the open standard.
 */
function suits(skill: CatalogueSkill, framework: string): boolean {
  if (!frameworkLoadsSkills(framework)) return false
  if (skill.frameworks.includes(framework)) return true
  return ![...skillCatalogue().values()].some((other) => other.frameworks.includes(framework))
}

function catalogueFor(framework: string): string[] {
  return [...skillCatalogue().values()]
    .filter((skill) => suits(skill, framework))
    .map((skill) => skill.id)
}

async function tierOf(userId: string): Promise<TierKey> {
  const owner = await User.find(userId)
  return owner?.effectiveTier ?? 'free'
}

function stateOf(agent: Agent, tier: TierKey): SkillsState {
  return {
    installed: [...(agent.installedSkills ?? [])],
    available: catalogueFor(agent.framework),
    tier,
    maxSkills: tierPlan(tier).maxSkills,
  }
}

/** GET /agents/:id/skills (each route's agent found and authorized by its controller). */
export async function skillsState(agent: Agent): Promise<SkillsState> {
  return stateOf(agent, await tierOf(agent.userId))
}

/** The catalogue skill a request names: 404 when there is none, 400 when the framework cannot load it. */
function requireSkill(skillId: string, framework: string) {
  const skill = catalogueSkill(skillId)
  if (!skill) throw new NotFoundException(`No skill "${skillId}" in the catalogue`)
  if (!suits(skill, framework)) {
    throw new ValidationException(`The skill "${skillId}" is not available for ${framework} agents`)
  }
  return skill
}

function requireContainerAllowed(agent: Agent) {
  if (NOT_RUNNING.has(agent.status)) {
    throw new AgentNotRunningException(
      `The agent is ${agent.status}: start it before changing its skills`
    )
  }
}

/**
 * Writes the change to the agent's disk (running or asleep) after the list
 * is stored. The stored list is the truth: a failure here is logged and the
 * next start renders the skills again.
 */
async function applyToDisk(agent: Agent, change: SkillChange) {
  try {
    await runtime.syncSkills(runtimeSpecFor(agent), change)
  } catch (error) {
    logger.warn({ agentId: agent.id, err: error }, 'skills: writing to the agent failed')
  }
}

/**
 * POST /agents/:id/skills/install: stores the skill in the agent's list
 * (under the agent's row lock, so two installs cannot both pass the tier's
 * limit) and writes it where the framework loads it. Installing an
 * installed skill changes nothing.
 */
export async function installSkill(checked: Agent, skillId: string): Promise<SkillsState> {
  const skill = requireSkill(skillId, checked.framework)
  requireContainerAllowed(checked)
  const tier = await tierOf(checked.userId)
  const maxSkills = tierPlan(tier).maxSkills

  const { agent, added } = await db.transaction(async (trx) => {
    const locked = await findAgent(checked.id, { trx, forUpdate: true })
    requireContainerAllowed(locked)
    const installed = [...(locked.installedSkills ?? [])]
    if (installed.includes(skill.id)) return { agent: locked, added: false }
    if (installed.length >= maxSkills) {
      throw new ValidationException(
        `The ${tierPlan(tier).name} plan allows ${maxSkills} skills per agent; uninstall one or upgrade the plan`
      )
    }
    locked.installedSkills = [...installed, skill.id]
    locked.useTransaction(trx)
    await locked.save()
    return { agent: locked, added: true }
  })
  if (added)
    await applyToDisk(agent, { write: [{ id: skill.id, content: skill.content }], remove: [] })
  return stateOf(agent, tier)
}

/** POST /agents/:id/skills/uninstall: 404 when the skill is not installed on the agent. */
export async function uninstallSkill(checked: Agent, skillId: string): Promise<SkillsState> {
  if (!catalogueSkill(skillId) && !(checked.installedSkills ?? []).includes(skillId)) {
    throw new NotFoundException(`No skill "${skillId}" in the catalogue`)
  }
  requireContainerAllowed(checked)
  const agent = await db.transaction(async (trx) => {
    const locked = await findAgent(checked.id, { trx, forUpdate: true })
    requireContainerAllowed(locked)
    const installed = locked.installedSkills ?? []
    if (!installed.includes(skillId)) {
      throw new NotFoundException(`The skill "${skillId}" is not installed on this agent`)
    }
    locked.installedSkills = installed.filter((id) => id !== skillId)
    locked.useTransaction(trx)
    await locked.save()
    return locked
  })
  await applyToDisk(agent, { write: [], remove: [skillId] })
  return stateOf(agent, await tierOf(agent.userId))
}
