import env from '#start/env'
import { defineConfig, stores } from '@adonisjs/limiter'
import type { InferLimiters } from '@adonisjs/limiter/types'

/**
 * Counters for daily /api/v1 quotas and abuse limits (login failures,
 * verification mail). Redis when REDIS_URL is set, so many instances share
 * the counts; otherwise the PostgreSQL table `rate_limits`. Both stores
 * update a counter in one atomic statement.
 */
const limiterConfig = defineConfig({
  default: env.get('REDIS_URL') ? 'redis' : 'database',
  stores: {
    redis: stores.redis({ connectionName: 'main', keyPrefix: 'rl' }),
    // Connection registered by the identity provider (asynchronous commit).
    database: stores.database({
      tableName: 'rate_limits',
      keyPrefix: 'rl',
      connectionName: 'rate_limits',
    }),
  },
})

export default limiterConfig

declare module '@adonisjs/limiter/types' {
  export interface LimitersList extends InferLimiters<typeof limiterConfig> {}
}
