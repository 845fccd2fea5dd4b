import logger from '@adonisjs/core/services/logger'
import mail from '@adonisjs/mail/services/main'

export interface OutgoingMail {
  to: string
  subject: string
  text: string
  html: string
}

/** Sends one message through the configured mailer (SMTP or storage/mail). */
export async function sendMail(message: OutgoingMail): Promise<void> {
  await mail.send((m) => {
    m.to(message.to).subject(message.subject).text(message.text).html(message.html)
  })
}

/**
 * Sends without making the caller wait: registration answers in the same
 * time whether or not a mail goes out. A failure is logged (without the
 * body, which may hold a single-use link) and does not reach the client.
 */
export function sendMailInBackground(message: OutgoingMail): Promise<void> {
  return sendMail(message).catch((error) => {
    logger.error({ err: error, subject: message.subject }, 'sending mail failed')
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
