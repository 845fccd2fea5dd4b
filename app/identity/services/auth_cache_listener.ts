import pg from 'pg'
import { authCache } from '#identity/services/auth_cache'

/** Channel the identity triggers NOTIFY on (payload `u:<id>`, `k:<id>` or `b:<id>:<balance>:<txid>`). */
export const IDENTITY_CHANNEL = 'identity_cache'

const RETRY_MS = 1000

/**
 * Keeps one LISTEN connection for cache invalidation. The auth cache is on
 * only while this connection is up; when it drops, the cache is flushed and
 * bypassed until the connection is back.
 */
export class AuthCacheListener {
  #client?: pg.Client
  #stopped = false
  #retry?: NodeJS.Timeout

  constructor(
    private connectionString: string,
    private log: (message: string, error?: unknown) => void
  ) {}

  async start() {
    this.#stopped = false
    await this.#connect()
  }

  async #connect() {
    if (this.#stopped) return
    const client = new pg.Client({ connectionString: this.connectionString })
    client.on('notification', (message) => {
      const payload = message.payload ?? ''
      const id = payload.slice(2)
      if (payload.startsWith('b:')) {
        // b:<user id>:<balance>:<txid> (only the balance changed)
        const [userId, balance, txid] = id.split(':')
        authCache.balanceAnnounced(userId, Number(balance), txid)
      } else if (payload.startsWith('u:')) authCache.forgetUser(id)
      else if (payload.startsWith('k:')) authCache.forgetApiKey(id)
    })
    client.on('error', (error) => this.#lost(client, error))
    client.on('end', () => this.#lost(client))
    try {
      await client.connect()
      await client.query(`LISTEN ${IDENTITY_CHANNEL}`)
      this.#client = client
      authCache.setEnabled(true)
    } catch (error) {
      this.#lost(client, error)
    }
  }

  #lost(client: pg.Client, error?: unknown) {
    if (this.#client && this.#client !== client) return
    this.#client = undefined
    authCache.setEnabled(false)
    client.removeAllListeners('end')
    client.end().catch(() => {})
    if (this.#stopped) return
    this.log('auth cache invalidation connection lost; cache bypassed until it is back', error)
    clearTimeout(this.#retry)
    this.#retry = setTimeout(() => void this.#connect(), RETRY_MS)
    this.#retry.unref()
  }

  async stop() {
    this.#stopped = true
    clearTimeout(this.#retry)
    authCache.setEnabled(false)
    const client = this.#client
    this.#client = undefined
    if (client) {
      client.removeAllListeners('end')
      await client.end().catch(() => {})
    }
  }
}
