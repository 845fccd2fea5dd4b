import env from '#start/env'
import { defineConfig } from '@adonisjs/redis'
import type { InferConnections } from '@adonisjs/redis/types'

/**
 * Through a Redis outage a connection keeps reconnecting (every second at
 * most) for as long as it lasts, so the service uses Redis again within
 * about a second of its return without a restart; a command sent while it
 * is down fails after one attempt instead of waiting in a queue, so no
 * request hangs on Redis (docs/reliability.md).
 */
const outageOptions = {
  retryStrategy: (times: number) => Math.min(times * 100, 1000),
  maxRetriesPerRequest: 1,
}

/**
 * One connection from REDIS_URL (`redis://[user:pass@]host:port[/db]`).
 * Connections open lazily: without REDIS_URL nothing uses Redis and the
 * service falls back to its database and in-process stores.
 */
export function redisOptionsFromUrl(value: string | undefined) {
  if (!value) return { host: '127.0.0.1', port: 6379, ...outageOptions }
  const url = new URL(value)
  const db = Number(url.pathname.replace(/^\//, '') || 0)
  return {
    ...outageOptions,
    host: url.hostname,
    port: Number(url.port || 6379),
    username: url.username ? decodeURIComponent(url.username) : undefined,
    password: url.password ? decodeURIComponent(url.password) : undefined,
    db: Number.isInteger(db) ? db : 0,
    tls: url.protocol === 'rediss:' ? {} : undefined,
  }
}

const redisConfig = defineConfig({
  connection: 'main',
  connections: {
    main: {
      ...redisOptionsFromUrl(env.get('REDIS_URL')),
      keyPrefix: '',
    },
  },
})

export default redisConfig

declare module '@adonisjs/redis/types' {
  export interface RedisConnections extends InferConnections<typeof redisConfig> {}
}
