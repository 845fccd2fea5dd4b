import encryption from '@adonisjs/core/services/encryption'
import logger from '@adonisjs/core/services/logger'
import db from '@adonisjs/lucid/services/db'
import type { PeriodicJob } from '#core/jobs/periodic_jobs'
import type { OutgoingMail } from '#identity/services/mailer'

/**
 * The durable outbox (`mail_outbox`): every mail is stored first, then
 * delivered from the table, so an SMTP outage or a restart only delays it.
 * Delivery claims rows with SKIP LOCKED and a short claim, so several
 * instances never send one message twice and a claim of a dead instance
 * lapses. Failed attempts back off (30 s doubling, at most 1 h) and give
 * up after MAX_ATTEMPTS (about 6.5 hours of retries).
 */
export const MAX_ATTEMPTS = 12
const FIRST_RETRY_MS = 30_000
const LONGEST_RETRY_MS = 3_600_000
/** Longer than a bounded SMTP exchange (config/mail.ts timeouts). */
const CLAIM_MS = 120_000
const BATCH = 50

export type DeliverMail = (message: OutgoingMail) => Promise<void>

interface OutboxRow {
  id: string
  recipient: string
  subject: string
  body_encrypted: string | null
  attempts: number
}

export function retryDelayMs(attempts: number): number {
  return Math.min(FIRST_RETRY_MS * 2 ** Math.max(0, attempts - 1), LONGEST_RETRY_MS)
}

/** Stores the message; returns its outbox id. */
export async function enqueueMail(message: OutgoingMail): Promise<string> {
  const body = encryption.encrypt(JSON.stringify({ text: message.text, html: message.html }))
  const [row] = await db
    .table('mail_outbox')
    .insert({ recipient: message.to, subject: message.subject, body_encrypted: body })
    .returning('id')
  return row.id as string
}

const CLAIM_DUE = `
  update mail_outbox set claimed_until = now() + (? * interval '1 millisecond')
  where id in (
    select id from mail_outbox
    where sent_at is null and failed_at is null and next_attempt_at <= now()
      and (claimed_until is null or claimed_until < now()) %s
    order by next_attempt_at
    limit ?
    for update skip locked)
  returning id, recipient, subject, body_encrypted, attempts`

async function claim(onlyId?: string): Promise<OutboxRow[]> {
  const sql = CLAIM_DUE.replace('%s', onlyId ? 'and id = ?' : '')
  const bindings = onlyId ? [CLAIM_MS, onlyId, 1] : [CLAIM_MS, BATCH]
  const result = await db.rawQuery(sql, bindings)
  return result.rows as OutboxRow[]
}

async function attempt(row: OutboxRow, deliver: DeliverMail): Promise<boolean> {
  const body = row.body_encrypted ? encryption.decrypt<string>(row.body_encrypted) : null
  if (!body) {
    // Undecryptable (APP_KEY changed): retrying cannot help.
    await db
      .from('mail_outbox')
      .where('id', row.id)
      .update({ failed_at: db.raw('now()'), claimed_until: null, last_error: 'body unreadable' })
    return false
  }
  const { text, html } = JSON.parse(body) as { text: string; html: string }
  try {
    await deliver({ to: row.recipient, subject: row.subject, text, html })
  } catch (error) {
    const attempts = row.attempts + 1
    const givenUp = attempts >= MAX_ATTEMPTS
    await db
      .from('mail_outbox')
      .where('id', row.id)
      .update({
        attempts,
        claimed_until: null,
        last_error: String((error as Error).message ?? error).slice(0, 500),
        next_attempt_at: db.raw(`now() + (? * interval '1 millisecond')`, [retryDelayMs(attempts)]),
        failed_at: givenUp ? db.raw('now()') : null,
      })
    // The subject and id only: the body may hold a single-use link.
    logger[givenUp ? 'error' : 'warn'](
      { err: error, outboxId: row.id, subject: row.subject, attempts },
      givenUp ? 'mail not delivered: giving up' : 'mail not delivered: will retry'
    )
    return false
  }
  await db
    .from('mail_outbox')
    .where('id', row.id)
    .update({
      attempts: row.attempts + 1,
      sent_at: db.raw('now()'),
      claimed_until: null,
      body_encrypted: null,
      last_error: null,
    })
  return true
}

/** Delivers one stored message now if it is due and unclaimed; true when it went out. */
export async function deliverQueued(id: string, deliver: DeliverMail): Promise<boolean> {
  const [row] = await claim(id)
  return row ? attempt(row, deliver) : false
}

/** Delivers every due message (one batch); returns how many went out. */
export async function deliverDueMail(deliver: DeliverMail): Promise<number> {
  let sent = 0
  for (const row of await claim()) {
    if (await attempt(row, deliver)) sent++
  }
  return sent
}

export function mailOutboxJob(deliver: DeliverMail): PeriodicJob {
  return { name: 'mail-outbox', everyMs: 15_000, run: () => deliverDueMail(deliver).then(() => {}) }
}
