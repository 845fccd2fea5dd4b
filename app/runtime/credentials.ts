import { randomBytes } from 'node:crypto'
import { mkdir, readFile, rename, rm } from 'node:fs/promises'
import { dirname } from 'node:path'
import { stagingName, writeFileOnce } from '#core/files/atomic_file'

/** The token a credentials file holds, if it is a whole one. */
function storedToken(text: string | undefined): string | undefined {
  try {
    const stored = JSON.parse(text ?? '')
    if (typeof stored.gatewayToken === 'string' && stored.gatewayToken.length >= 32) {
      return stored.gatewayToken
    }
  } catch {
    // Missing, half written by an older release, or unreadable.
  }
  return undefined
}

/**
 * The per-agent gateway token: the secret the service presents to the
 * agent's framework (OpenClaw gateway token, Hermes API_SERVER_KEY). Made
 * on first start, kept in the agent's runtime folder (mode 0600) until the
 * agent is removed, so a restarted service, or another instance on the same
 * storage, can still talk to the agent. Instances making it at the same
 * moment agree: the first file published wins and every one answers it.
 */
export async function gatewayTokenFor(credentialsFile: string): Promise<string> {
  const existing = await readFile(credentialsFile, 'utf8').catch(() => undefined)
  const token = storedToken(existing)
  if (token) return token
  await mkdir(dirname(credentialsFile), { recursive: true, mode: 0o700 })
  // A damaged file (half written by an older release) goes, so that a whole one can be
  // published; a whole one another instance published meanwhile stands.
  if (
    existing !== undefined &&
    !storedToken(await readFile(credentialsFile, 'utf8').catch(() => undefined))
  ) {
    const aside = stagingName(credentialsFile)
    await rename(credentialsFile, aside).catch(() => {})
    await rm(aside, { force: true })
  }
  const fresh = `${JSON.stringify({ gatewayToken: randomBytes(24).toString('hex') })}\n`
  const published = storedToken(await writeFileOnce(credentialsFile, fresh, { mode: 0o600 }))
  if (!published) throw new Error(`${credentialsFile} holds no usable gateway token`)
  return published
}
