import { appUrl } from '#config/app'
import type { OutgoingMail } from '#identity/services/mailer'
import { mailLayout } from '#identity/mails/account_mails'

/** Tells the holder that staff answered their ticket (the reply is in the dashboard too). */
export function staffReplyMail(to: string, subject: string, reply: string): OutgoingMail {
  const lines = [
    `Our support team answered your ticket "${subject}":`,
    reply,
    'Reply from your dashboard to continue the conversation.',
  ]
  const link = `${appUrl}/support`
  return {
    to,
    subject: `Re: ${subject}`,
    text: `${lines.join('\n\n')}\n\n${link}\n`,
    html: mailLayout(`Re: ${subject}`, lines),
  }
}
