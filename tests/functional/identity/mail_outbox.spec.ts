import { createServer as createTcpServer } from 'node:net'
import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import nodemailer from 'nodemailer'
import { SMTPServer } from 'smtp-server'
import {
  MAX_ATTEMPTS,
  deliverDueMail,
  deliverQueued,
  enqueueMail,
  type DeliverMail,
} from '#identity/services/mail_outbox'

/** A free loopback port with nothing listening on it (an SMTP server that is down). */
async function freePort(): Promise<number> {
  const server = createTcpServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** A real SMTP server (nodemailer's smtp-server) that keeps what it receives. */
async function startSmtp(port: number) {
  const received: string[] = []
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    onData(stream, _session, done) {
      let data = ''
      stream.on('data', (chunk) => (data += chunk))
      stream.on('end', () => {
        received.push(data)
        done()
      })
    },
  })
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  return { received, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

/** Delivery over real SMTP with nodemailer, as the SMTP mailer does. */
function smtpDelivery(port: number): DeliverMail {
  const transport = nodemailer.createTransport({
    host: '127.0.0.1',
    port,
    secure: false,
    ignoreTLS: true,
    connectionTimeout: 2_000,
    greetingTimeout: 2_000,
  })
  return async (message) => {
    await transport.sendMail({ from: 'no-reply@example.test', ...message })
  }
}

function mailFor(tag: string) {
  return {
    to: `${tag}@example.test`,
    subject: `Outbox ${tag}`,
    text: `Your link: https://example.test/verify/${tag}-secret`,
    html: `<p>${tag}</p>`,
  }
}

async function row(id: string) {
  return db.from('mail_outbox').where('id', id).firstOrFail()
}

/** Makes a waiting message due now, instead of sleeping through its backoff. */
async function makeDue(id: string) {
  await db
    .from('mail_outbox')
    .where('id', id)
    .update({ next_attempt_at: db.raw('now()') })
}

test.group('Mail outbox (SMTP down, then back)', () => {
  test('a mail sent while SMTP is down is kept encrypted and delivered once SMTP is back', async ({
    assert,
  }) => {
    const port = await freePort()
    const deliver = smtpDelivery(port)
    const tag = `down-${Date.now()}`
    const id = await enqueueMail(mailFor(tag))

    assert.isFalse(await deliverQueued(id, deliver))
    const waiting = await row(id)
    assert.equal(waiting.attempts, 1)
    assert.match(waiting.last_error, /ECONNREFUSED/)
    assert.isNull(waiting.sent_at)
    assert.isAbove(new Date(waiting.next_attempt_at).getTime(), Date.now())
    assert.notInclude(
      waiting.body_encrypted,
      'secret',
      'the single-use link is not stored in plain text'
    )
    // Not due yet: a retry before its time does nothing.
    assert.equal(await deliverDueMail(deliver), 0)

    const smtp = await startSmtp(port)
    try {
      await makeDue(id)
      assert.isAtLeast(await deliverDueMail(deliver), 1)
      const mine = smtp.received.filter((data) => data.includes(`${tag}@example.test`))
      assert.lengthOf(mine, 1)
      assert.include(mine[0], `${tag}-secret`)
      const sent = await row(id)
      assert.isNotNull(sent.sent_at)
      assert.isNull(sent.body_encrypted, 'a delivered body is dropped')

      // Delivered mail is never sent again.
      await makeDue(id)
      await deliverDueMail(deliver)
      assert.lengthOf(
        smtp.received.filter((data) => data.includes(`${tag}@example.test`)),
        1
      )
    } finally {
      await smtp.close()
    }
  }).timeout(30_000)

  test('two workers racing over the due mail deliver each message exactly once', async ({
    assert,
  }) => {
    const port = await freePort()
    const smtp = await startSmtp(port)
    try {
      const deliver = smtpDelivery(port)
      const tag = `race-${Date.now()}`
      const ids = await Promise.all([1, 2, 3, 4, 5].map((n) => enqueueMail(mailFor(`${tag}-${n}`))))
      await Promise.all([
        deliverDueMail(deliver),
        deliverDueMail(deliver),
        deliverQueued(ids[0], deliver),
      ])
      for (const n of [1, 2, 3, 4, 5]) {
        const copies = smtp.received.filter((data) => data.includes(`${tag}-${n}@example.test`))
        assert.lengthOf(copies, 1, `message ${n} delivered once`)
      }
    } finally {
      await smtp.close()
    }
  }).timeout(30_000)

  test('a message that keeps failing is given up after the last attempt, with its error', async ({
    assert,
  }) => {
    const deliver = smtpDelivery(await freePort())
    const id = await enqueueMail(mailFor(`giveup-${Date.now()}`))
    await db
      .from('mail_outbox')
      .where('id', id)
      .update({ attempts: MAX_ATTEMPTS - 1 })
    assert.isFalse(await deliverQueued(id, deliver))
    const failed = await row(id)
    assert.equal(failed.attempts, MAX_ATTEMPTS)
    assert.isNotNull(failed.failed_at)
    await makeDue(id)
    assert.isFalse(await deliverQueued(id, deliver), 'a given-up message is not retried')
  }).timeout(30_000)
})
