import { createServer, type Server, type Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { test } from '@japa/runner'
import { SMTPServer } from 'smtp-server'
import { TEST_PASSWORD, uniqueEmail, uniqueUsername } from '#tests/helpers/identity'
import { freePort, waitFor } from '#tests/helpers/processes'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'

/**
 * The SMTP server fails for real under a running service (SMTP_URL set):
 * one that accepts the connection and never says a word, then none at all.
 * Sign-ups answer at once all the same; each attempt ends within its bound;
 * the mail waits in the durable outbox, survives a kill -9 of the service,
 * and is delivered exactly once when SMTP is back.
 */
/** The SMTP greeting bound (config/mail.ts), plus slack for a loaded machine. */
const GREETING_BOUND_MS = 10_000
const PROMPT_MS = 5_000

/** Accepts TCP connections and never answers (a hung SMTP server). */
async function startSilentServer(port: number) {
  const sockets = new Set<Socket>()
  const server: Server = createServer((socket) => {
    sockets.add(socket)
    socket.on('error', () => {})
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  return {
    async close() {
      for (const socket of sockets) socket.destroy()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}

/** A real SMTP server (smtp-server) keeping each message with its recipients. */
async function startSmtp(port: number) {
  const received: { to: string[]; data: string }[] = []
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, done) {
      let data = ''
      stream.on('data', (chunk) => (data += chunk))
      stream.on('end', () => {
        received.push({ to: session.envelope.rcptTo.map((rcpt) => rcpt.address), data })
        done()
      })
    },
  })
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  return { received, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

test.group('Fault: the SMTP server hangs, then is down, then comes back', (group) => {
  let port: number
  let service: ServiceUnderFault
  let smtp: Awaited<ReturnType<typeof startSmtp>> | undefined

  group.setup(async () => {
    port = await freePort()
    service = await startServiceUnderFault({ SMTP_URL: `smtp://127.0.0.1:${port}` })
    return async () => {
      await service.destroy()
      await smtp?.close()
    }
  })

  /** Signs up (which queues a verification mail); answers how long the request took. */
  async function register(email: string): Promise<number> {
    const started = Date.now()
    const answer = await service.call('/auth/register', {
      method: 'POST',
      json: { email, username: uniqueUsername('m'), password: TEST_PASSWORD },
    })
    if (answer.status !== 200) throw new Error(`register: ${JSON.stringify(answer)}`)
    return Date.now() - started
  }

  async function outboxOf(email: string) {
    return service.query(
      `select id, attempts, last_error, sent_at, claimed_until from mail_outbox
        where recipient = $1 order by created_at`,
      [email]
    )
  }

  /** Waits until every message to `email` was attempted `attempts` times and is not claimed. */
  function attempted(email: string, attempts: number, timeoutMs: number) {
    return waitFor(
      async () => {
        const rows = await outboxOf(email)
        const done =
          rows.length > 0 &&
          rows.every((row) => row.attempts >= attempts && row.claimed_until === null)
        return done ? rows : undefined
      },
      { timeoutMs, intervalMs: 100, what: `the mail to ${email} to be attempted` }
    )
  }

  test('a hung SMTP server fails the attempt within its bound, a down one at once; both mails are delivered exactly once from the outbox once SMTP is back, a kill -9 in between', async ({
    assert,
  }) => {
    const hungFor = uniqueEmail('smtp-hung')
    const downFor = uniqueEmail('smtp-down')

    const silent = await startSilentServer(port)
    let hungMs: number
    try {
      const registerMs = await register(hungFor)
      assert.isBelow(registerMs, PROMPT_MS, 'sign-up does not wait for SMTP')
      const started = Date.now()
      const [row] = await attempted(hungFor, 1, GREETING_BOUND_MS + 30_000)
      hungMs = Date.now() - started
      assert.match(row.last_error, /greeting never received|timeout|timed out/i)
      assert.isNull(row.sent_at)
      assert.isBelow(hungMs, GREETING_BOUND_MS + 15_000, 'the attempt ended within its bound')
    } finally {
      await silent.close()
    }

    // Nothing listens now: the attempt fails at once.
    assert.isBelow(await register(downFor), PROMPT_MS)
    const [down] = await attempted(downFor, 1, 15_000)
    assert.match(down.last_error, /ECONNREFUSED/)
    assert.isNull(down.sent_at)

    // The mail is in the database, not in the process: kill it, bring SMTP back, restart.
    await service.kill9()
    smtp = await startSmtp(port)
    // Due now instead of after their backoff (30 s and more).
    await service.query(
      `update mail_outbox set next_attempt_at = now() where recipient = any($1::text[])`,
      [[hungFor, downFor]]
    )
    const restartedAt = Date.now()
    await service.restart()
    await waitFor(
      async () => {
        const rows = [...(await outboxOf(hungFor)), ...(await outboxOf(downFor))]
        return rows.every((row) => row.sent_at !== null) ? true : undefined
      },
      { timeoutMs: 60_000, what: 'the outbox to deliver both mails' }
    )
    const deliveredMs = Date.now() - restartedAt
    // A second delivery would come from the next ticks; give them a moment.
    await sleep(2_000)
    for (const email of [hungFor, downFor]) {
      const copies = smtp.received.filter((message) => message.to.includes(email))
      const rows = await outboxOf(email)
      assert.isAbove(rows.length, 0)
      assert.isTrue(rows.every((row) => row.sent_at !== null))
      assert.lengthOf(copies, rows.length, `each mail to ${email} delivered once`)
      assert.match(copies[0].data, /verify/i)
    }
    console.log(
      `    SMTP hung: attempt failed after ${hungMs} ms (bound ${GREETING_BOUND_MS} ms); ` +
        `down: refused at once; delivered exactly once ${deliveredMs} ms after the restart with SMTP back`
    )
  }).timeout(180_000)
})
