import type { HttpContext } from '@adonisjs/core/http'
import { installSkill, skillsState, uninstallSkill } from '#skills/services/skills_service'
import { skillIdValidator } from '#skills/validators/skill_validators'

/** An agent's skills from the repository's catalogue (docs/skills.md). */
export default class SkillsController {
  async index({ auth, params }: HttpContext) {
    return skillsState(auth.getUserOrFail(), params.id)
  }

  async install({ auth, params, request }: HttpContext) {
    const { skillId } = await request.validateUsing(skillIdValidator)
    return installSkill(auth.getUserOrFail(), params.id, skillId)
  }

  async uninstall({ auth, params, request }: HttpContext) {
    const { skillId } = await request.validateUsing(skillIdValidator)
    return uninstallSkill(auth.getUserOrFail(), params.id, skillId)
  }
}
