import { randomBytes } from 'node:crypto'
import { chmod, mkdir, rename, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import nodemailer from 'nodemailer'
import { MailResponse } from '@adonisjs/mail'
import type { MailTransportContract, NodeMailerMessage } from '@adonisjs/mail/types'

export interface StoredMail {
  messageId: string
  date: string
  from: string
  to: string[]
  subject: string
  text: string | null
  html: string | null
}

function maskAddress(address: string): string {
  const [local, domain] = address.split('@')
  return `${local.slice(0, 1)}***@${domain ?? ''}`
}

/** Written beside and renamed: a reader never sees half a mail; 0600: it holds live links. */
async function writeWhole(path: string, data: string | Buffer) {
  await writeFile(`${path}.partial`, data, { mode: 0o600 })
  await rename(`${path}.partial`, path)
}

/** A recipient address made safe for a file name. */
export function mailFileTag(address: string): string {
  return address.toLowerCase().replace(/[^a-z0-9@._-]/g, '_')
}

/**
 * Mail transport used when SMTP_URL is unset: each message is written to
 * `<dir>/<time>-<id>-<recipient>.eml` (RFC 822, openable by a mail client)
 * and `.json` (for scripts and tests), and one log line says where. The log
 * line carries the subject and a masked recipient, never the body (it holds
 * single-use links).
 */
export class FileMailTransport implements MailTransportContract {
  #builder = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'unix' })

  constructor(
    private directory: string,
    private log: (fields: Record<string, unknown>, message: string) => void
  ) {}

  async send(message: NodeMailerMessage) {
    const info = await this.#builder.sendMail(message)
    const recipients = info.envelope.to ?? []
    const stamp = new Date().toISOString().replace(/[:.]/g, '-')
    const base = `${stamp}-${randomBytes(4).toString('hex')}-${mailFileTag(recipients[0] ?? 'unknown')}`

    const stored: StoredMail = {
      messageId: info.messageId,
      date: new Date().toISOString(),
      from: String(info.envelope.from ?? ''),
      to: recipients,
      subject: String(message.subject ?? ''),
      text: typeof message.text === 'string' ? message.text : null,
      html: typeof message.html === 'string' ? message.html : null,
    }

    await mkdir(this.directory, { recursive: true, mode: 0o700 })
    // mkdir's mode applies only when it creates the folder: one left open by an older version is closed too.
    await chmod(this.directory, 0o700)
    await writeWhole(join(this.directory, `${base}.eml`), info.message as Buffer)
    await writeWhole(join(this.directory, `${base}.json`), JSON.stringify(stored, null, 2))

    this.log(
      { file: `${base}.json`, to: recipients.map(maskAddress), subject: stored.subject },
      'mail written to storage/mail (SMTP_URL is not set)'
    )
    return new MailResponse(info.messageId, info.envelope, stored)
  }
}
