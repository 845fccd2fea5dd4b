/** What the skills routes take and answer (the source of their part of /openapi.json). */
import { describes, t } from '#core/openapi/shapes'
import { defineContracts } from '#core/openapi/contracts'
import { AgentNotRunningException, ForbiddenException } from '#core/exceptions/api_exceptions'
import { skillIdValidator } from '#skills/validators/skill_validators'
import { skillCatalogue } from '#skills/services/skill_catalogue'
import type { SkillsState } from '#skills/services/skills_service'

const skillsState = t.named(
  'SkillsState',
  describes<SkillsState>()(
    t.object({
      installed: t.array(t.string()),
      available: t.array(t.string()),
      tier: t.string(),
      maxSkills: t.integer(),
    })
  )
)

/** Only catalogue skills exist (404 for another id, checked by the service). */
const catalogueSkill = () => ({ properties: { skillId: { enum: [...skillCatalogue().keys()] } } })

export default defineContracts({
  'agents.skills.index': {
    summary: 'Skills state',
    description:
      "Installed skill ids, the catalogue skills the agent's framework can load, the owner's tier and its maxSkills.",
    responses: { 200: skillsState },
    errors: [ForbiddenException],
  },
  'agents.skills.install': {
    summary: 'Install a skill',
    description:
      "Writes the skill's SKILL.md where the agent's framework loads it (OpenClaw: workspace skills/; Hermes: HERMES_HOME/skills/). 400 beyond the tier's maxSkills, 404 for a skill not in the catalogue, 409 AGENT_NOT_RUNNING on a stopped, paused or failed agent; a sleeping agent gets it at its next start. Answers the skills state.",
    body: skillIdValidator,
    bodyRules: catalogueSkill,
    responses: { 200: skillsState },
    errors: [ForbiddenException, AgentNotRunningException],
  },
  'agents.skills.uninstall': {
    summary: 'Uninstall a skill',
    description:
      "Removes the skill from the agent and its folder from the framework's skills directory. 404 when it is not installed. Answers the skills state.",
    body: skillIdValidator,
    responses: { 200: skillsState },
    errors: [ForbiddenException, AgentNotRunningException],
  },
})
