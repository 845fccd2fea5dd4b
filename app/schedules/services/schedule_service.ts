import db from '@adonisjs/lucid/services/db'
import logger from '@adonisjs/core/services/logger'
import { NotFoundException, ValidationException } from '#core/exceptions/api_exceptions'
import { INSTANCE_ID, deadHoldersIn } from '#core/jobs/instance'
import type { PeriodicJob } from '#core/jobs/periodic_jobs'
import { tierPlan } from '#config/plans'
import type User from '#identity/models/user'
import Agent from '#agents/models/agent'
import { isUuid } from '#core/http/ids'
import { chatWithAgent } from '#chat/services/chat_service'
import {
  checkCron,
  checkTimezone,
  missedRuns,
  nextRunAfter,
  shortestIntervalMinutes,
} from '#schedules/services/schedule_times'

/**
 * Scheduled tasks (docs/schedules.md): an agent receives `message` on a
 * cron timetable, through the same chat service as any message (container,
 * customer key or hosted path; metered; history and feed say `schedule`;
 * a sleeping agent wakes).
 */
interface ScheduleRow {
  id: string
  agent_id: string
  name: string
  cron: string
  timezone: string
  message: string
  enabled: boolean
  next_run_at: Date | null
  last_run_at: Date | null
  created_at: Date
}

export interface NewSchedule {
  name: string
  cron: string
  message: string
  timezone?: string
}

/** Runs listed per task. */
const RUNS_LISTED = 50
/** A claimed run that has not finished after this long is another instance's to retry. */
const CLAIM_MS = 10 * 60_000
/** Due tasks claimed per tick, run side by side. */
const BATCH = 20

function present(row: ScheduleRow) {
  return {
    id: row.id,
    name: row.name,
    cron: row.cron,
    timezone: row.timezone,
    message: row.message,
    enabled: row.enabled,
    lastRunAt: row.last_run_at ? new Date(row.last_run_at).toISOString() : null,
    nextRunAt: row.enabled && row.next_run_at ? new Date(row.next_run_at).toISOString() : null,
    createdAt: new Date(row.created_at).toISOString(),
  }
}

async function scheduleOf(agentId: string, jobId: unknown): Promise<ScheduleRow> {
  const row = isUuid(jobId)
    ? await db.from('agent_schedules').where({ id: jobId, agent_id: agentId }).first()
    : null
  if (!row) throw new NotFoundException('Scheduled task not found')
  return row
}

// The routes' functions take the agent their controller found and authorized
// (AgentPolicy); `owner` is that agent's owner, whose plan sets the limits.

export async function listSchedules(agent: Agent) {
  return schedulesOfAgent(agent.id)
}

/** An agent's tasks, oldest first, without an ownership check (the staff console's agent page). */
export async function schedulesOfAgent(agentId: string) {
  const rows = await db
    .from('agent_schedules')
    .where('agent_id', agentId)
    .orderBy('created_at', 'asc')
  return rows.map(present)
}

export async function createSchedule(owner: User, agent: Agent, input: NewSchedule) {
  const plan = tierPlan(owner.effectiveTier)
  const timezone = checkTimezone(input.timezone ?? 'UTC')
  const cron = checkCron(input.cron, timezone)
  const interval = shortestIntervalMinutes(cron, timezone)
  if (interval < plan.minScheduleIntervalMinutes) {
    throw new ValidationException(
      `cron: runs may be at most every ${plan.minScheduleIntervalMinutes} minutes on the ${plan.name} plan (this one runs every ${interval} minutes)`
    )
  }
  const [{ count }] = await db
    .from('agent_schedules')
    .where('agent_id', agent.id)
    .count('* as count')
  if (Number(count) >= plan.maxSchedules) {
    throw new ValidationException(
      `The ${plan.name} plan allows ${plan.maxSchedules} scheduled tasks per agent`
    )
  }
  const [row] = await db
    .table('agent_schedules')
    .insert({
      agent_id: agent.id,
      name: input.name,
      cron,
      timezone,
      message: input.message,
      enabled: true,
      next_run_at: nextRunAfter(cron, timezone, new Date()),
    })
    .returning('*')
  return present(row)
}

export async function deleteSchedule(agent: Agent, jobId: unknown) {
  const row = await scheduleOf(agent.id, jobId)
  await db.from('agent_schedules').where('id', row.id).delete()
  return { deleted: true, id: row.id }
}

/** Paused tasks keep their place and do not run; resume computes the next run from now. */
export async function setScheduleEnabled(
  agent: Agent,
  jobId: unknown,
  enabled: boolean,
  now = new Date()
) {
  const row = await scheduleOf(agent.id, jobId)
  const [updated] = await db
    .from('agent_schedules')
    .where('id', row.id)
    .update({
      enabled,
      next_run_at: enabled ? nextRunAfter(row.cron, row.timezone, now) : row.next_run_at,
    })
    .returning('*')
  return present(updated)
}

export async function listRuns(agent: Agent, jobId: unknown) {
  const row = await scheduleOf(agent.id, jobId)
  const runs = await db
    .from('agent_schedule_runs')
    .where('schedule_id', row.id)
    .orderBy('started_at', 'desc')
    .limit(RUNS_LISTED)
  return runs.map((run) => ({
    id: run.id,
    startedAt: new Date(run.started_at).toISOString(),
    finishedAt: new Date(run.finished_at).toISOString(),
    status: run.status as 'ok' | 'error' | 'skipped',
    error: run.error,
    replyExcerpt: run.reply_excerpt,
  }))
}

async function recordRun(
  scheduleId: string,
  run: { startedAt: Date; status: 'ok' | 'error' | 'skipped'; error?: string; reply?: string }
) {
  await db.table('agent_schedule_runs').insert({
    schedule_id: scheduleId,
    started_at: run.startedAt,
    finished_at: new Date(),
    status: run.status,
    error: run.error?.slice(0, 500) ?? null,
    reply_excerpt: run.reply?.slice(0, 300) ?? null,
  })
}

/** One due task: skipped slots noted, the message sent once, the next run set from now. */
async function runOne(row: ScheduleRow, now: Date) {
  const startedAt = new Date()
  const missed = row.next_run_at ? missedRuns(row.cron, row.timezone, row.next_run_at, now) : 0
  if (missed > 0) {
    await recordRun(row.id, {
      startedAt,
      status: 'skipped',
      error: `${missed} earlier run${missed === 1 ? '' : 's'} missed while the service was down; ran once instead`,
    })
  }
  try {
    const agent = await Agent.find(row.agent_id)
    if (!agent || agent.status !== 'active') {
      await recordRun(row.id, {
        startedAt,
        status: 'skipped',
        error: `the agent is ${agent?.status ?? 'gone'}; start it to resume its schedule`,
      })
    } else {
      const answer = await chatWithAgent(agent, { message: row.message }, { source: 'schedule' })
      await recordRun(row.id, { startedAt, status: 'ok', reply: answer.content })
    }
  } catch (error) {
    await recordRun(row.id, { startedAt, status: 'error', error: (error as Error).message })
  } finally {
    await db
      .from('agent_schedules')
      .where('id', row.id)
      .update({
        last_run_at: startedAt,
        next_run_at: nextRunAfter(row.cron, row.timezone, now > startedAt ? now : startedAt),
        claimed_by: null,
        claimed_until: null,
      })
  }
}

/**
 * Runs every task due at `now`, each once across all instances: due rows
 * are claimed in one statement (FOR UPDATE SKIP LOCKED, with a claim that
 * lapses if this instance dies mid-run, and is taken over at once when its
 * holder provably died). Returns how many ran.
 */
export async function runDueSchedules(now = new Date(), holder = INSTANCE_ID): Promise<number> {
  const claimed = await db.rawQuery(
    `update agent_schedules
        set claimed_by = ?, claimed_until = now() + (? * interval '1 millisecond')
      where id in (
        select id from agent_schedules
         where enabled and next_run_at <= ?
           and (claimed_until is null or claimed_until < now() or claimed_by = any(?::text[]))
         order by next_run_at
         limit ?
         for update skip locked)
      returning *`,
    [holder, CLAIM_MS, now, await deadHoldersIn('agent_schedules', 'claimed_by'), BATCH]
  )
  const rows = claimed.rows as ScheduleRow[]
  await Promise.all(
    rows.map((row) =>
      runOne(row, now).catch((error) =>
        logger.error({ err: error, scheduleId: row.id }, 'schedules: run failed')
      )
    )
  )
  return rows.length
}

/**
 * Registered by start/jobs.ts. Every 15 s; due tasks are claimed row by row,
 * so instances never run one twice.
 */
export const runDueSchedulesJob: PeriodicJob = {
  name: 'schedules.run_due',
  everyMs: 15_000,
  run: () => runDueSchedules().then(() => {}),
}
