import env from '#start/env'
import { defineConfig } from '@adonisjs/redis'
import type { InferConnections } from '@adonisjs/redis/types'

/**
 * One connection from REDIS_URL (`redis://[user:pass@]host:port[/db]`).
 * Connections open lazily: without REDIS_URL nothing uses Redis and the
 * service falls back to its database and in-process stores.
 */
export function redisOptionsFromUrl(value: string | undefined) {
  if (!value) return { host: '127.0.0.1', port: 6379 }
  const url = new URL(value)
  const db = Number(url.pathname.replace(/^\//, '') || 0)
  return {
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
      retryStrategy(times: number) {
        return times > 10 ? null : times * 50
      },
    },
  },
})

export default redisConfig

declare module '@adonisjs/redis/types' {
  export interface RedisConnections extends InferConnections<typeof redisConfig> {}
}
