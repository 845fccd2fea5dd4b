import type { HttpContext } from '@adonisjs/core/http'
import AgentPolicy from '#agents/policies/agent_policy'
import { findAgent } from '#agents/services/agent_access'
import { installSkill, skillsState, uninstallSkill } from '#skills/services/skills_service'
import { skillIdValidator } from '#skills/validators/skill_validators'

/** An agent's skills from the repository's catalogue (docs/skills.md). */
export default class SkillsController {
  /**
   * @index
   * @summary Skills state
   * @description Installed skill ids, the catalogue skills the agent's framework can load, the owner's tier and its maxSkills.
   * @responseBody 200 - {"success":true,"data":{"installed":["token-research"],"available":["code-review","daily-digest","meeting-notes","token-research","translation","wallet-report","web-page-summary"],"tier":"free","maxSkills":2}}
   */
  async index({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return skillsState(agent)
  }

  /**
   * @install
   * @summary Install a skill
   * @description Writes the skill's SKILL.md where the agent's framework loads it (OpenClaw: workspace skills/; Hermes: HERMES_HOME/skills/). 400 beyond the tier's maxSkills, 404 for a skill not in the catalogue, 409 AGENT_NOT_RUNNING on a stopped, paused or failed agent; a sleeping agent gets it at its next start. Answers the skills state.
   * @requestBody {"skillId":"token-research"}
   * @responseBody 200 - {"success":true,"data":{"installed":["token-research"],"available":["code-review","daily-digest","meeting-notes","token-research","translation","wallet-report","web-page-summary"],"tier":"free","maxSkills":2}}
   */
  async install({ bouncer, params, request }: HttpContext) {
    const { skillId } = await request.validateUsing(skillIdValidator)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return installSkill(agent, skillId)
  }

  /**
   * @uninstall
   * @summary Uninstall a skill
   * @description Removes the skill from the agent and its folder from the framework's skills directory. 404 when it is not installed. Answers the skills state.
   * @requestBody {"skillId":"token-research"}
   * @responseBody 200 - {"success":true,"data":{"installed":[],"available":["code-review","daily-digest","meeting-notes","token-research","translation","wallet-report","web-page-summary"],"tier":"free","maxSkills":2}}
   */
  async uninstall({ bouncer, params, request }: HttpContext) {
    const { skillId } = await request.validateUsing(skillIdValidator)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return uninstallSkill(agent, skillId)
  }
}
