import vine from '@vinejs/vine'

/** POST /agents/:id/schedules (spec). The cron and time zone are checked by the service. */
export const createScheduleValidator = vine.create({
  name: vine.string().trim().minLength(1).maxLength(100),
  cron: vine.string().trim().minLength(1).maxLength(100),
  message: vine.string().trim().minLength(1).maxLength(4000),
  timezone: vine.string().trim().minLength(1).maxLength(64).optional(),
})
