import env from '#start/env'
import logger from '@adonisjs/core/services/logger'
import redis from '@adonisjs/redis/services/main'
import { defineConfig, stores } from '@adonisjs/limiter'
import type { InferLimiters } from '@adonisjs/limiter/types'
import { failoverStore } from '#core/limits/failover_limiter_store'

/**
 * Counters for daily /api/v1 quotas and abuse limits (login failures,
 * sign-ups, verification mail, webhook and channel rates). Without
 * REDIS_URL: the PostgreSQL table `rate_limits`. With it: Redis, so many
 * instances share fast counters, falling over to that same table while
 * Redis is down (docs/reliability.md: limits fail over, never open).
 * Both stores update a counter in one atomic statement.
 */
const database = stores.database({
  tableName: 'rate_limits',
  keyPrefix: 'rl',
  connectionName: 'rate_limits',
})

let failedOverAt = 0
const limiterConfig = defineConfig({
  default: env.get('REDIS_URL') ? 'redis' : 'database',
  stores: {
    redis: failoverStore({
      primary: stores.redis({
        connectionName: 'main',
        keyPrefix: 'rl',
        rejectIfRedisNotReady: true,
      }),
      fallback: database,
      primaryReady: () => redis.connection('main').status === 'ready',
      onFailover(error) {
        if (Date.now() - failedOverAt < 10_000) return
        failedOverAt = Date.now()
        logger.warn({ err: error }, 'Redis is unavailable: rate limits count in PostgreSQL for now')
      },
    }),
    database,
  },
})

export default limiterConfig

declare module '@adonisjs/limiter/types' {
  export interface LimitersList extends InferLimiters<typeof limiterConfig> {}
}
