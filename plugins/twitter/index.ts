import { setTimeout as sleep } from 'node:timers/promises'
import {
  ApiResponseError,
  TwitterApi,
  TwitterApiv2,
  type TweetV2,
  type UserV2,
} from 'twitter-api-v2'
import {
  ChannelAuthError,
  definePlugin,
  type ChannelConnectContext,
  type ChannelReplier,
} from '#plugins/types'

/**
 * X (Twitter) through twitter-api-v2 with OAuth 1.0a user context
 * (`config.channels.twitter.{ apiKey, apiSecret, accessToken, accessSecret }`).
 * Mentions of the account are polled (the mentions timeline, from the
 * newest id seen, kept in the connection's store so a restart or another
 * instance neither misses nor repeats one) and answered as replies; a long
 * answer becomes a thread. History before the first connect is not
 * answered. Rate limits are honoured (a 429 waits for x-rate-limit-reset).
 */
const CREDENTIAL_FIELDS = ['apiKey', 'apiSecret', 'accessToken', 'accessSecret'] as const

/** Mentions poll interval; X allows 180 mention reads per 15 minutes per user. */
function pollIntervalMs(): number {
  const configured = Number(process.env.TWITTER_POLL_MS)
  return Number.isFinite(configured) && configured >= 50 ? configured : 15_000
}

interface TwitterStore {
  sinceId?: string
}

/** The v2 client at TWITTER_API_URL when set (the library has no working option for it). */
class TwitterClient extends TwitterApiv2 {
  constructor(context: ChannelConnectContext) {
    const { apiKey, apiSecret, accessToken, accessSecret } = context.credentials as Record<
      (typeof CREDENTIAL_FIELDS)[number],
      string
    >
    super(new TwitterApi({ appKey: apiKey, appSecret: apiSecret, accessToken, accessSecret }))
    if (context.apiBaseUrl) this.setPrefix(`${context.apiBaseUrl.replace(/\/+$/, '')}/2/`)
  }
}

function refused(error: unknown): boolean {
  return error instanceof ApiResponseError && (error.code === 401 || error.code === 403)
}

const REFUSED = 'X refused the credentials (revoked or without read and write access)'

/** Text of a mention without the @handles it starts with. */
function mentionText(tweet: TweetV2): string {
  return tweet.text.replace(/^(\s*@\w+)+\s*/, '').trim()
}

/** Replies thread: each part answers the previous one. */
function threadReplier(api: TwitterClient, tweetId: string): ChannelReplier {
  let replyTo = tweetId
  return {
    async send(_target, text) {
      const posted = await api.reply(text, replyTo)
      replyTo = posted.data.id
    },
  }
}

async function newestMentions(api: TwitterClient, me: UserV2, sinceId: string | undefined) {
  const timeline = await api.userMentionTimeline(me.id, {
    ...(sinceId ? { since_id: sinceId } : { max_results: 5 }),
    'expansions': ['author_id'],
    'tweet.fields': ['author_id', 'conversation_id'],
    'user.fields': ['username'],
  })
  const users = new Map((timeline.includes.users ?? []).map((user) => [user.id, user]))
  const tweets = [...(timeline.tweets ?? [])].sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1))
  return { tweets, users, newestId: timeline.meta.newest_id }
}

/** Where polling resumes: the stored cursor, or on a first connect after what is already there. */
async function startingCursor(api: TwitterClient, me: UserV2, context: ChannelConnectContext) {
  const stored = (await context.store.load<TwitterStore>()) ?? {}
  if (stored.sinceId) return stored.sinceId
  const newest = await newestMentions(api, me, undefined)
  const sinceId = newest.newestId ?? '1'
  await context.store.save({ sinceId } satisfies TwitterStore)
  return sinceId
}

async function pollMentions(
  api: TwitterClient,
  me: UserV2,
  context: ChannelConnectContext,
  startAt: string
) {
  let sinceId = startAt
  while (!context.signal.aborted) {
    try {
      const { tweets, users } = await newestMentions(api, me, sinceId)
      for (const tweet of tweets) {
        if (context.signal.aborted) return
        if (tweet.author_id !== me.id) {
          const author = users.get(tweet.author_id ?? '')
          await context.receive(
            {
              id: tweet.id,
              conversationId: tweet.conversation_id ?? tweet.id,
              sender: {
                id: tweet.author_id ?? 'unknown',
                handle: author?.username,
                name: author?.name,
              },
              text: mentionText(tweet),
            },
            threadReplier(api, tweet.id)
          )
        }
        sinceId = tweet.id
        await context.store.save({ sinceId } satisfies TwitterStore)
      }
      await sleep(pollIntervalMs(), undefined, { signal: context.signal }).catch(() => {})
    } catch (error) {
      if (context.signal.aborted) return
      if (refused(error)) {
        context.report({ state: 'error', error: REFUSED })
        return
      }
      const resetAt =
        error instanceof ApiResponseError && error.code === 429 && error.rateLimit
          ? error.rateLimit.reset * 1000
          : Date.now() + pollIntervalMs()
      context.log('twitter: polling mentions failed', { error: (error as Error).message })
      await sleep(Math.max(1000, resetAt - Date.now()), undefined, {
        signal: context.signal,
      }).catch(() => {})
    }
  }
}

export default definePlugin({
  kind: 'channel',
  name: 'twitter',
  version: '1.0.0',
  description: 'X (Twitter) mentions answered as replies, through twitter-api-v2',
  maxMessageLength: 280,
  connectsBy: 'config',

  validateCredentials(credentials) {
    const clean: Record<string, string> = {}
    for (const field of CREDENTIAL_FIELDS) {
      const value = credentials[field]
      if (typeof value !== 'string' || !value.trim() || value.length > 200) {
        throw new Error(
          `${field} is required (OAuth 1.0a user context, from the X developer portal)`
        )
      }
      clean[field] = value.trim()
    }
    const unknown = Object.keys(credentials).filter(
      (key) => !(CREDENTIAL_FIELDS as readonly string[]).includes(key)
    )
    if (unknown.length > 0) throw new Error(`unknown field ${unknown[0]}`)
    return clean
  },

  async connect(context) {
    const api = new TwitterClient(context)
    let me: UserV2
    let sinceId: string
    try {
      const answer = await api.me()
      me = answer.data
      sinceId = await startingCursor(api, me, context)
    } catch (error) {
      if (refused(error)) throw new ChannelAuthError(REFUSED)
      throw error
    }
    const polling = pollMentions(api, me, context, sinceId)
    return {
      identity: { handle: `@${me.username}` },
      async close() {
        await polling.catch(() => {})
      },
    }
  },
})
