import type { OutgoingMail } from '#identity/services/mailer'
import { escapeHtml } from '#identity/services/mailer'

export function mailLayout(
  title: string,
  paragraphs: string[],
  link?: { href: string; label: string }
) {
  const body = paragraphs.map((p) => `<p>${escapeHtml(p)}</p>`).join('\n')
  const button = link
    ? `<p><a href="${escapeHtml(link.href)}">${escapeHtml(link.label)}</a></p>`
    : ''
  return `<!doctype html><html><body><h1>${escapeHtml(title)}</h1>\n${body}\n${button}</body></html>`
}

/** The link that verifies a new account's address (valid 24 hours). */
export function verificationMail(to: string, username: string, link: string): OutgoingMail {
  const lines = [
    `Hello ${username},`,
    'Confirm your e-mail address to activate your Agent Host account. The link is valid for 24 hours and works once.',
  ]
  return {
    to,
    subject: 'Verify your e-mail address',
    text: `${lines.join('\n\n')}\n\n${link}\n`,
    html: mailLayout('Verify your e-mail address', lines, {
      href: link,
      label: 'Verify my address',
    }),
  }
}

/** Sent instead of a second account when someone registers a taken address. */
export function registrationAttemptMail(to: string, loginUrl: string): OutgoingMail {
  const lines = [
    'Someone (perhaps you) tried to create an Agent Host account with this e-mail address, which already has an account.',
    'If that was you, sign in instead. If not, you can ignore this message: nothing changed.',
  ]
  return {
    to,
    subject: 'Your Agent Host account',
    text: `${lines.join('\n\n')}\n\n${loginUrl}\n`,
    html: mailLayout('Your Agent Host account', lines),
  }
}

/** The signed download link of a finished data export (valid 7 days). */
export function exportReadyMail(to: string, link: string, expiresAt: Date): OutgoingMail {
  const lines = [
    'Your data export is ready.',
    `Download it while signed in to your account, before ${expiresAt.toISOString()}.`,
    'The link only works for you: it needs both this signature and your sign-in.',
  ]
  return {
    to,
    subject: 'Your data export is ready',
    text: `${lines.join('\n\n')}\n\n${link}\n`,
    html: mailLayout('Your data export is ready', lines, { href: link, label: 'Download my data' }),
  }
}

/** The link that lets the owner choose a new password (valid 30 minutes, once). */
export function passwordResetMail(to: string, link: string): OutgoingMail {
  const lines = [
    'Someone (perhaps you) asked to reset the password of your Agent Host account.',
    'Open the link within 30 minutes to choose a new one; it works once. Every session of the account is signed out. If you did not ask, ignore this message: nothing changed.',
  ]
  return {
    to,
    subject: 'Reset your password',
    text: `${lines.join('\n\n')}\n\n${link}\n`,
    html: mailLayout('Reset your password', lines, { href: link, label: 'Choose a new password' }),
  }
}
