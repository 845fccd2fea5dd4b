import { randomBytes } from 'node:crypto'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { dirname } from 'node:path'

/**
 * The per-agent gateway token: the secret the service presents to the
 * agent's framework (OpenClaw gateway token, Hermes API_SERVER_KEY). Made
 * on first start, kept in the agent's runtime folder (mode 0600) until the
 * agent is removed, so a restarted service can still talk to adopted agents.
 */
export async function gatewayTokenFor(credentialsFile: string): Promise<string> {
  try {
    const stored = JSON.parse(await readFile(credentialsFile, 'utf8'))
    if (typeof stored.gatewayToken === 'string' && stored.gatewayToken.length >= 32) {
      return stored.gatewayToken
    }
  } catch {
    // Missing or unreadable: make a new one.
  }
  const gatewayToken = randomBytes(24).toString('hex')
  await mkdir(dirname(credentialsFile), { recursive: true, mode: 0o700 })
  await writeFile(credentialsFile, `${JSON.stringify({ gatewayToken })}\n`, { mode: 0o600 })
  return gatewayToken
}
