/** What the schedules routes take and answer (the source of their part of /openapi.json). */
import { t } from '#core/openapi/shapes'
import { defineContracts } from '#core/openapi/contracts'
import { createScheduleValidator } from '#schedules/validators/schedule_validators'

export default defineContracts({
  'agents.schedules.index': {
    summary: 'Scheduled tasks of the agent',
    description:
      'An array of scheduled tasks; nextRunAt is null while a task is paused. Times are UTC.',
    responses: {
      200: t.array(
        t.object({
          id: t.string(),
          name: t.string(),
          cron: t.string(),
          timezone: t.string(),
          message: t.string(),
          enabled: t.boolean(),
          lastRunAt: t.unknown(),
          nextRunAt: t.dateTime(),
          createdAt: t.dateTime(),
        })
      ),
    },
  },
  'agents.schedules.store': {
    summary: 'Schedule a message to the agent',
    description:
      'cron is a 5-field expression or a nickname such as @hourly, read in timezone (an IANA name, default UTC). 400 VALIDATION_ERROR for a bad expression, an unknown zone, runs closer together than the plan allows, or more tasks than the plan allows.',
    body: createScheduleValidator,
    responses: {
      201: t.object({
        id: t.string(),
        name: t.string(),
        cron: t.string(),
        timezone: t.string(),
        message: t.string(),
        enabled: t.boolean(),
        lastRunAt: t.unknown(),
        nextRunAt: t.dateTime(),
        createdAt: t.dateTime(),
      }),
    },
  },
  'agents.schedules.destroy': {
    summary: 'Delete a scheduled task',
    responses: {
      200: t.object({
        deleted: t.boolean(),
        id: t.string(),
      }),
    },
  },
  'agents.schedules.pause': {
    summary: 'Pause a scheduled task',
    description: 'The task is kept and does not run (enabled false, nextRunAt null).',
    responses: {
      200: t.object({
        id: t.string(),
        name: t.string(),
        cron: t.string(),
        timezone: t.string(),
        message: t.string(),
        enabled: t.boolean(),
        lastRunAt: t.unknown(),
        nextRunAt: t.unknown(),
        createdAt: t.dateTime(),
      }),
    },
  },
  'agents.schedules.resume': {
    summary: 'Resume a paused task',
    description: 'The next run is computed from now.',
    responses: {
      200: t.object({
        id: t.string(),
        name: t.string(),
        cron: t.string(),
        timezone: t.string(),
        message: t.string(),
        enabled: t.boolean(),
        lastRunAt: t.unknown(),
        nextRunAt: t.dateTime(),
        createdAt: t.dateTime(),
      }),
    },
  },
  'agents.schedules.runs': {
    summary: "The task's last 50 runs",
    description:
      'Newest first; status ok, error or skipped (agent stopped, or runs missed while the service was down).',
    responses: {
      200: t.object({
        runs: t.array(
          t.object({
            id: t.string(),
            startedAt: t.dateTime(),
            finishedAt: t.dateTime(),
            status: t.string(),
            error: t.unknown(),
            replyExcerpt: t.string(),
          })
        ),
      }),
    },
  },
})
