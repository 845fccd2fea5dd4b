/*
|--------------------------------------------------------------------------
| Environment variables
|--------------------------------------------------------------------------
|
| Every variable of CONTRACT.md is validated here. Variables with an
| embedded default are optional: the service runs with none of them set.
|
*/
import { Env } from '@adonisjs/core/env'

export default await Env.create(new URL('../', import.meta.url), {
  NODE_ENV: Env.schema.enum.optional(['development', 'production', 'test'] as const),
  PORT: Env.schema.number.optional(),
  HOST: Env.schema.string.optional({ format: 'host' }),
  APP_URL: Env.schema.string.optional({ format: 'url', tld: false }),
  APP_KEY: Env.schema.string.optional(),
  SIGNUPS_PER_CLIENT_PER_DAY: Env.schema.number.optional(),
  PASSWORD_HASH_COST: Env.schema.number.optional(),
  CORS_ORIGINS: Env.schema.string.optional(),
  TRUST_PROXY: Env.schema.string.optional(),
  LOG_LEVEL: Env.schema.string.optional(),

  DATABASE_URL: Env.schema.string.optional(),
  REDIS_URL: Env.schema.string.optional(),
  SMTP_URL: Env.schema.string.optional(),

  AGENT_RUNTIME: Env.schema.enum.optional(['process', 'docker', 'swarm', 'kubernetes'] as const),
  SWARM_PUBLISH_HOST: Env.schema.string.optional(),
  SWARM_SLEEP: Env.schema.enum.optional(['stop', 'pause'] as const),
  AGENT_IMAGES: Env.schema.enum.optional(['auto', 'registry', 'local'] as const),
  AGENT_BOOT_CONCURRENCY: Env.schema.number.optional(),
  AGENT_MEMORY_BUDGET_MB: Env.schema.number.optional(),
  /** The boot queue's order: fair (default) or fifo, the earlier order, for bench/density's baseline. */
  AGENT_BOOT_QUEUE: Env.schema.enum.optional(['fair', 'fifo'] as const),
  AGENT_ROOM_SLEEPS: Env.schema.number.optional(),
  AGENT_PREPARES_AT_ONCE: Env.schema.number.optional(),
  AGENT_IDLE_SLEEP_SECS: Env.schema.number.optional(),
  AGENT_SANDBOX: Env.schema.enum.optional(['auto', 'bubblewrap', 'unshare', 'none'] as const),
  AGENT_COMPILE_CACHE: Env.schema.enum.optional(['on', 'off'] as const),
  AGENT_CHECKPOINT: Env.schema.enum.optional(['on', 'off'] as const),
  AGENT_CHECKPOINT_DISK_MB: Env.schema.number.optional(),
  AGENT_CHECKPOINT_DELTA: Env.schema.enum.optional(['on', 'off'] as const),
  AGENT_SLEEP_PIPELINE: Env.schema.enum.optional(['on', 'off'] as const),
  AGENT_TEMPLATES: Env.schema.enum.optional(['on', 'off'] as const),
  AGENT_WORKSPACE_QUOTA_MB: Env.schema.number.optional(),
  BACKUP_MAX_ARCHIVE_MB: Env.schema.number.optional(),
  BACKUP_MAX_UNPACKED_MB: Env.schema.number.optional(),
  BACKUP_DAILY: Env.schema.enum.optional(['on', 'off'] as const),
  AGENTS_DIR: Env.schema.string.optional(),

  MODEL_API_URL: Env.schema.string.optional({ format: 'url', tld: false }),
  MODEL_API_KEY: Env.schema.string.optional(),
  MODEL_NAME: Env.schema.string.optional(),
  MODEL_ALLOWLIST: Env.schema.string.optional(),

  SOLANA_RPC_URL: Env.schema.string.optional({ format: 'url', tld: false }),
  TREASURY_ADDRESS: Env.schema.string.optional(),
  USDC_MINT: Env.schema.string.optional(),
  PLATFORM_TOKEN_MINT: Env.schema.string.optional(),
  PLATFORM_TOKEN_PRICE_ID: Env.schema.string.optional(),
  PRICE_API_URL: Env.schema.string.optional({ format: 'url', tld: false }),
  TELEGRAM_API_URL: Env.schema.string.optional({ format: 'url', tld: false }),
  DISCORD_API_URL: Env.schema.string.optional({ format: 'url', tld: false }),
  TWITTER_API_URL: Env.schema.string.optional({ format: 'url', tld: false }),
  TOKEN_PRICE_API_URL: Env.schema.string.optional({ format: 'url', tld: false }),

  ADMIN_EMAILS: Env.schema.string.optional(),
})
