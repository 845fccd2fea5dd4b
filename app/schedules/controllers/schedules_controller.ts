import type { HttpContext } from '@adonisjs/core/http'
import AgentPolicy from '#agents/policies/agent_policy'
import { findAgent } from '#agents/services/agent_access'
import {
  createSchedule,
  deleteSchedule,
  listRuns,
  listSchedules,
  setScheduleEnabled,
} from '#schedules/services/schedule_service'
import { createScheduleValidator } from '#schedules/validators/schedule_validators'

/** An agent's scheduled tasks (docs/schedules.md). */
export default class SchedulesController {
  async index({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return listSchedules(agent)
  }

  async store({ auth, bouncer, params, request, response }: HttpContext) {
    const input = await request.validateUsing(createScheduleValidator)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    response.status(201)
    return createSchedule(auth.getUserOrFail(), agent, input)
  }

  async destroy({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return deleteSchedule(agent, params.jobId)
  }

  async pause({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return setScheduleEnabled(agent, params.jobId, false)
  }

  async resume({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return setScheduleEnabled(agent, params.jobId, true)
  }

  async runs({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return { runs: await listRuns(agent, params.jobId) }
  }
}
