import type { HttpContext } from '@adonisjs/core/http'
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
  async index({ auth, params }: HttpContext) {
    return listSchedules(auth.getUserOrFail(), params.id)
  }

  async store({ auth, params, request, response }: HttpContext) {
    const input = await request.validateUsing(createScheduleValidator)
    response.status(201)
    return createSchedule(auth.getUserOrFail(), params.id, input)
  }

  async destroy({ auth, params }: HttpContext) {
    return deleteSchedule(auth.getUserOrFail(), params.id, params.jobId)
  }

  async pause({ auth, params }: HttpContext) {
    return setScheduleEnabled(auth.getUserOrFail(), params.id, params.jobId, false)
  }

  async resume({ auth, params }: HttpContext) {
    return setScheduleEnabled(auth.getUserOrFail(), params.id, params.jobId, true)
  }

  async runs({ auth, params }: HttpContext) {
    return { runs: await listRuns(auth.getUserOrFail(), params.id, params.jobId) }
  }
}
