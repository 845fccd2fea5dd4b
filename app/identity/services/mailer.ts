import logger from '@adonisjs/core/services/logger'
import mail from '@adonisjs/mail/services/main'
import { deliverQueued, enqueueMail } from '#identity/services/mail_outbox'

export interface OutgoingMail {
  to: string
  subject: string
  text: string
  html: string
}

/** Sends one message through the configured mailer (SMTP or storage/mail) now. */
export async function sendMail(message: OutgoingMail): Promise<void> {
  await mail.send((m) => {
    m.to(message.to).subject(message.subject).text(message.text).html(message.html)
  })
}

/**
 * Stores the message in the durable outbox and tries to deliver it at
 * once, without making the caller wait: registration answers in the same
 * time whether or not a mail goes out. A failed attempt is retried by the
 * outbox job (app/identity/services/mail_outbox.ts); only a failure to
 * store it is lost, and that is logged (without the body, which may hold
 * a single-use link).
 */
export function sendMailInBackground(message: OutgoingMail): Promise<void> {
  return enqueueMail(message)
    .then((id) => deliverQueued(id, sendMail))
    .then(() => {})
    .catch((error) => {
      logger.error({ err: error, subject: message.subject }, 'queueing mail failed')
    })
}

export function escapeHtml(value: string): string {
  return value
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;')
}
