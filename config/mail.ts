import { join } from 'node:path'
import env from '#start/env'
import app from '@adonisjs/core/services/app'
import logger from '@adonisjs/core/services/logger'
import { defineConfig, transports } from '@adonisjs/mail'
import type { InferMailers } from '@adonisjs/mail/types'
import { appUrl } from '#config/app'
import { storageDir } from '#core/bootstrap/paths'
import { FileMailTransport } from '#identity/services/file_mail_transport'

/** `smtp://user:pass@host:port` (or smtps://) as nodemailer SMTP options. */
function smtpOptions(value: string) {
  const url = new URL(value)
  const secure = url.protocol === 'smtps:'
  return {
    host: url.hostname,
    port: Number(url.port || (secure ? 465 : 587)),
    secure,
    // Bounded: a hung SMTP server fails the attempt and the outbox retries later.
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 30_000,
    auth: url.username
      ? {
          type: 'login' as const,
          user: decodeURIComponent(url.username),
          pass: decodeURIComponent(url.password),
        }
      : undefined,
  }
}

const smtpUrl = env.get('SMTP_URL')

/**
 * SMTP from SMTP_URL; without it every message is written to storage/mail/
 * and announced in the log (CONTRACT.md).
 */
const mailConfig = defineConfig({
  default: smtpUrl ? 'smtp' : 'file',
  from: { address: `no-reply@${new URL(appUrl).hostname}`, name: 'Agent Host' },
  mailers: {
    // Transports are built on first use: the SMTP one only exists to be used when configured.
    smtp: transports.smtp(smtpOptions(smtpUrl ?? 'smtp://127.0.0.1:25')),
    file: () =>
      new FileMailTransport(join(storageDir(app.appRoot), 'mail'), (fields, message) =>
        logger.info(fields, message)
      ),
  },
})

export default mailConfig

declare module '@adonisjs/mail/types' {
  export interface MailersList extends InferMailers<typeof mailConfig> {}
}
