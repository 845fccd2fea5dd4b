import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Short-lived values shared by every service instance when REDIS_URL is
 * unset (app/core/cache/shared_cache.ts). Unlogged: a cache needs no WAL
 * and may be empty after a crash.
 */
export default class extends BaseSchema {
  async up() {
    this.schema.raw(`create unlogged table shared_cache (
      key text primary key,
      value jsonb not null,
      expires_at timestamptz not null
    )`)
    this.schema.raw('create index shared_cache_expires_at on shared_cache (expires_at)')
  }

  async down() {
    this.schema.raw('drop table if exists shared_cache')
  }
}
