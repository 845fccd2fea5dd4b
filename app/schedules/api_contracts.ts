/** What the schedules routes take and answer (the source of their part of /openapi.json). */
import { describes, t, type Answer } from '#core/openapi/shapes'
import { defineContracts } from '#core/openapi/contracts'
import { ForbiddenException } from '#core/exceptions/api_exceptions'
import { createScheduleValidator } from '#schedules/validators/schedule_validators'
import type { listRuns, listSchedules } from '#schedules/services/schedule_service'

const schedule = t.named(
  'Schedule',
  t.object({
    id: t.uuid(),
    name: t.string(),
    cron: t.string(),
    timezone: t.string(),
    message: t.string(),
    enabled: t.boolean(),
    lastRunAt: t.nullable(t.dateTime()),
    nextRunAt: t.nullable(t.dateTime()),
    createdAt: t.dateTime(),
  })
)

/** Every zone the runtime knows (the service asks Intl whether it can read the zone). */
const knownTimezones = () => ({
  properties: {
    timezone: { enum: ['UTC', ...Intl.supportedValuesOf('timeZone')], type: ['string', 'null'] },
  },
})

export default defineContracts({
  'agents.schedules.index': {
    summary: 'Scheduled tasks of the agent',
    description:
      'An array of scheduled tasks; nextRunAt is null while a task is paused. Times are UTC.',
    responses: { 200: describes<Answer<typeof listSchedules>>()(t.array(schedule)) },
    errors: [ForbiddenException],
  },
  'agents.schedules.store': {
    summary: 'Schedule a message to the agent',
    description:
      'cron is a 5-field expression or a nickname such as @hourly, read in timezone (an IANA name, default UTC). 400 VALIDATION_ERROR for a bad expression, an unknown zone, runs closer together than the plan allows, or more tasks than the plan allows.',
    body: createScheduleValidator,
    bodyRules: knownTimezones,
    responses: { 201: schedule },
    errors: [ForbiddenException],
  },
  'agents.schedules.destroy': {
    summary: 'Delete a scheduled task',
    responses: { 200: t.object({ deleted: t.literal(true), id: t.uuid() }) },
    errors: [ForbiddenException],
  },
  'agents.schedules.pause': {
    summary: 'Pause a scheduled task',
    description: 'The task is kept and does not run (enabled false, nextRunAt null).',
    responses: { 200: schedule },
    errors: [ForbiddenException],
  },
  'agents.schedules.resume': {
    summary: 'Resume a paused task',
    description: 'The next run is computed from now.',
    responses: { 200: schedule },
    errors: [ForbiddenException],
  },
  'agents.schedules.runs': {
    summary: "The task's last 50 runs",
    description:
      'Newest first; status ok, error or skipped (agent stopped, or runs missed while the service was down).',
    responses: {
      200: t.object({
        runs: describes<Answer<typeof listRuns>>()(
          t.array(
            t.object({
              id: t.uuid(),
              startedAt: t.dateTime(),
              finishedAt: t.dateTime(),
              status: t.enum(['ok', 'error', 'skipped']),
              error: t.nullable(t.string()),
              replyExcerpt: t.nullable(t.string()),
            })
          )
        ),
      }),
    },
    errors: [ForbiddenException],
  },
})
