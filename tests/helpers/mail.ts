/**
 * Reads the mail the service wrote to <STORAGE_DIR>/mail (no SMTP_URL in
 * tests), so flows like e-mail verification run end to end.
 */
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import app from '@adonisjs/core/services/app'
import { storageDir } from '#core/bootstrap/paths'
import { mailFileTag, type StoredMail } from '#identity/services/file_mail_transport'

export function mailDir(): string {
  return join(storageDir(app.appRoot), 'mail')
}

/** Every stored mail to this address, oldest first (in `dir`: another server's storage/mail). */
export async function mailsTo(address: string, dir = mailDir()): Promise<StoredMail[]> {
  const tag = mailFileTag(address)
  let files: string[]
  try {
    files = await readdir(dir)
  } catch {
    return []
  }
  const mine = files.filter((file) => file.endsWith(`-${tag}.json`)).sort()
  return Promise.all(
    mine.map(async (file) => JSON.parse(await readFile(join(dir, file), 'utf8')) as StoredMail)
  )
}

/**
 * Waits for the `count`-th mail to the address (optionally with a subject
 * matching), and returns it.
 */
export async function waitForMail(
  address: string,
  options: { subject?: RegExp; count?: number; timeoutMs?: number; dir?: string } = {}
): Promise<StoredMail> {
  const count = options.count ?? 1
  const deadline = Date.now() + (options.timeoutMs ?? 10_000)
  while (true) {
    const all = await mailsTo(address, options.dir)
    const matching = all.filter((m) => !options.subject || options.subject.test(m.subject))
    if (matching.length >= count) return matching[count - 1]
    if (Date.now() > deadline) {
      throw new Error(`No mail #${count} to ${address} within the time limit`)
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** The first link in the mail's text whose path starts with `pathPrefix`. */
export function linkIn(mail: StoredMail, pathPrefix: string): URL {
  const links = (mail.text ?? '').match(/https?:\/\/\S+/g) ?? []
  for (const link of links) {
    const url = new URL(link)
    if (url.pathname.startsWith(pathPrefix)) return url
  }
  throw new Error(`No link to ${pathPrefix} in mail "${mail.subject}"`)
}
