import { randomUUID } from 'node:crypto'
import env from '#start/env'
import logger from '@adonisjs/core/services/logger'
import redis from '@adonisjs/redis/services/main'
import { RateLimitExceededException } from '#core/exceptions/api_exceptions'
import { chatConfig } from '#config/chat'

/**
 * Long-lived connections an account may hold open at once: chat answers
 * streamed over SSE, live log streams, chat WebSockets. Each holds a socket
 * (and, for logs, a file follower), so they are capped per account.
 *
 * With REDIS_URL the cap counts across every instance: each open
 * connection is a member of a Redis sorted set per account and kind, scored
 * by an expiry its instance pushes forward while it stays open, so the
 * slots of an instance that died lapse within SLOT_TTL_MS. While Redis is
 * down (or without it) each instance enforces the cap on its own
 * connections, so the cap is never lifted, at worst multiplied by the
 * number of instances for the length of an outage.
 */
export const STREAM_LIMITS = {
  /** Chat answers streamed at once per account (config/chat.ts). */
  get chat() {
    return chatConfig.maxStreamsPerAccount
  },
  /** Live log streams per account. */
  logs: 5,
  /** Chat WebSockets per account (config/chat.ts). */
  get sockets() {
    return chatConfig.websocket.maxSocketsPerAccount
  },
  /**
   * Chats being answered at once per agent, on every surface (counted by
   * agent id, not account: config/chat.ts).
   */
  get agentChats() {
    return chatConfig.maxConcurrentChatsPerAgent
  },
}

export type StreamKind = keyof typeof STREAM_LIMITS

const SLOT_TTL_MS = 30_000
const KEY_PREFIX = 'slots'

/** Trims lapsed members, then adds ours if there is room: 1 when taken, 0 when full. */
const TAKE_SCRIPT = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1`

/** Per instance: open connections by `kind:account`. */
const local = new Map<string, number>()
/** Slots this instance holds in Redis (member -> key), renewed while open. */
const shared = new Map<string, string>()
let renewal: NodeJS.Timeout | undefined

function sharedStore() {
  if (!env.get('REDIS_URL')) return undefined
  const connection = redis.connection('main')
  return connection.status === 'ready' ? connection.ioConnection : undefined
}

function renewSharedSlots() {
  renewal ??= setInterval(() => {
    const store = sharedStore()
    if (!store || shared.size === 0) return
    const expiry = Date.now() + SLOT_TTL_MS
    const pipeline = store.pipeline()
    for (const [member, key] of shared) {
      pipeline.zadd(key, 'XX', expiry, member)
      pipeline.pexpire(key, SLOT_TTL_MS)
    }
    pipeline.exec().catch(() => {})
  }, SLOT_TTL_MS / 3)
  renewal.unref()
}

/** A slot in the cross-instance count, or null when the account has none left; undefined: Redis unusable. */
async function takeShared(key: string, limit: number): Promise<string | null | undefined> {
  const store = sharedStore()
  if (!store) return undefined
  const member = randomUUID()
  const now = Date.now()
  try {
    const taken = await store.eval(
      TAKE_SCRIPT,
      1,
      key,
      now,
      limit,
      now + SLOT_TTL_MS,
      member,
      SLOT_TTL_MS
    )
    if (Number(taken) !== 1) return null
  } catch (error) {
    logger.warn({ err: error }, 'connection caps: Redis unusable, counting on this instance only')
    return undefined
  }
  shared.set(member, key)
  renewSharedSlots()
  return member
}

/**
 * Takes a slot; answers its release (idempotent), or null when the owner
 * (an account, or an agent for `agentChats`) already holds its limit of
 * this kind.
 */
export async function tryTakeSlot(kind: StreamKind, ownerId: string): Promise<(() => void) | null> {
  const limit = STREAM_LIMITS[kind]
  const key = `${kind}:${ownerId}`
  const count = local.get(key) ?? 0
  if (count >= limit) return null
  // Counted here first, so concurrent takes on this instance cannot overshoot.
  local.set(key, count + 1)
  const releaseLocal = () => {
    const left = (local.get(key) ?? 1) - 1
    if (left > 0) local.set(key, left)
    else local.delete(key)
  }
  const redisKey = `${KEY_PREFIX}:${key}`
  const member = await takeShared(redisKey, limit)
  if (member === null) {
    releaseLocal()
    return null
  }
  let released = false
  return () => {
    if (released) return
    released = true
    releaseLocal()
    if (member) {
      shared.delete(member)
      sharedStore()
        ?.zrem(redisKey, member)
        .catch(() => {})
    }
  }
}

const REFUSALS: Record<'chat' | 'logs' | 'agentChats', (limit: number) => string> = {
  chat: (limit) => `At most ${limit} chat streams open at once per account`,
  logs: (limit) => `At most ${limit} live log streams open at once per account`,
  agentChats: (limit) =>
    `This agent is already answering ${limit} chats; try again when one has finished`,
}

/** Takes a slot or throws 429 RATE_LIMIT_EXCEEDED with Retry-After; returns the release. */
export async function takeStreamSlot(kind: 'chat' | 'logs' | 'agentChats', ownerId: string) {
  const release = await tryTakeSlot(kind, ownerId)
  if (!release) {
    throw RateLimitExceededException.retryAfter(REFUSALS[kind](STREAM_LIMITS[kind]), 5)
  }
  return release
}
