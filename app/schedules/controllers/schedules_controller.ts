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
  /**
   * @index
   * @summary Scheduled tasks of the agent
   * @description An array of scheduled tasks; nextRunAt is null while a task is paused. Times are UTC.
   * @responseBody 200 - {"success":true,"data":[{"id":"5b0c...","name":"Morning digest","cron":"0 9 * * *","timezone":"Europe/Paris","message":"Summarise the news","enabled":true,"lastRunAt":null,"nextRunAt":"2026-11-25T08:00:00.000Z","createdAt":"2026-11-24T12:00:00.000Z"}]}
   */
  async index({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return listSchedules(agent)
  }

  /**
   * @store
   * @summary Schedule a message to the agent
   * @description cron is a 5-field expression or a nickname such as @hourly, read in timezone (an IANA name, default UTC). 400 VALIDATION_ERROR for a bad expression, an unknown zone, runs closer together than the plan allows, or more tasks than the plan allows.
   * @requestBody {"name":"Morning digest","cron":"0 9 * * *","message":"Summarise the news","timezone":"Europe/Paris"}
   * @responseBody 201 - {"success":true,"data":{"id":"5b0c...","name":"Morning digest","cron":"0 9 * * *","timezone":"Europe/Paris","message":"Summarise the news","enabled":true,"lastRunAt":null,"nextRunAt":"2026-11-25T08:00:00.000Z","createdAt":"2026-11-24T12:00:00.000Z"}}
   */
  async store({ auth, bouncer, params, request, response }: HttpContext) {
    const input = await request.validateUsing(createScheduleValidator)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    response.status(201)
    return createSchedule(auth.getUserOrFail(), agent, input)
  }

  /**
   * @destroy
   * @summary Delete a scheduled task
   * @responseBody 200 - {"success":true,"data":{"deleted":true,"id":"5b0c..."}}
   */
  async destroy({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return deleteSchedule(agent, params.jobId)
  }

  /**
   * @pause
   * @summary Pause a scheduled task
   * @description The task is kept and does not run (enabled false, nextRunAt null).
   * @responseBody 200 - {"success":true,"data":{"id":"5b0c...","name":"Morning digest","cron":"0 9 * * *","timezone":"UTC","message":"Summarise the news","enabled":false,"lastRunAt":null,"nextRunAt":null,"createdAt":"2026-11-24T12:00:00.000Z"}}
   */
  async pause({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return setScheduleEnabled(agent, params.jobId, false)
  }

  /**
   * @resume
   * @summary Resume a paused task
   * @description The next run is computed from now.
   * @responseBody 200 - {"success":true,"data":{"id":"5b0c...","name":"Morning digest","cron":"0 9 * * *","timezone":"UTC","message":"Summarise the news","enabled":true,"lastRunAt":null,"nextRunAt":"2026-11-25T09:00:00.000Z","createdAt":"2026-11-24T12:00:00.000Z"}}
   */
  async resume({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return setScheduleEnabled(agent, params.jobId, true)
  }

  /**
   * @runs
   * @summary The task's last 50 runs
   * @description Newest first; status ok, error or skipped (agent stopped, or runs missed while the service was down).
   * @responseBody 200 - {"success":true,"data":{"runs":[{"id":"77aa...","startedAt":"2026-11-24T09:00:00.000Z","finishedAt":"2026-11-24T09:00:02.000Z","status":"ok","error":null,"replyExcerpt":"Here is your digest..."}]}}
   */
  async runs({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return { runs: await listRuns(agent, params.jobId) }
  }
}
