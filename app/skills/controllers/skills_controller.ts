import type { HttpContext } from '@adonisjs/core/http'
import AgentPolicy from '#agents/policies/agent_policy'
import { findAgent } from '#agents/services/agent_access'
import { installSkill, skillsState, uninstallSkill } from '#skills/services/skills_service'
import { skillIdValidator } from '#skills/validators/skill_validators'

/** An agent's skills from the repository's catalogue (docs/skills.md). */
export default class SkillsController {
  async index({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return skillsState(agent)
  }

  async install({ bouncer, params, request }: HttpContext) {
    const { skillId } = await request.validateUsing(skillIdValidator)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return installSkill(agent, skillId)
  }

  async uninstall({ bouncer, params, request }: HttpContext) {
    const { skillId } = await request.validateUsing(skillIdValidator)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return uninstallSkill(agent, skillId)
  }
}
