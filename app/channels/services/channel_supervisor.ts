import logger from '@adonisjs/core/services/logger'
import Agent from '#agents/models/agent'
import { decryptSecrets } from '#agents/services/config_secrets'
import { recordFeedEvent } from '#agents/services/feed_service'
import { INSTANCE_ID } from '#core/jobs/instance'
import plugins from '#plugins/services/plugins'
import { channelSettings, safeErrorText } from '#channels/services/channel_config'
import {
  CHANNEL_LEASE_MS,
  claimFreeRows,
  releaseRow,
  renewRows,
  rowStore,
  webhookSecretOf,
  writeReport,
  type ChannelRow,
} from '#channels/services/channel_rows'
import { routeInbound } from '#channels/services/channel_router'
import {
  ChannelAuthError,
  type ChannelConnectContext,
  type ChannelPlugin,
  type ChannelSession,
  type ChannelStateReport,
} from '#plugins/types'

/**
 * Holds this instance's channel connections (docs/channels.md). Every tick
 * it renews the leases of what it holds (closing what it lost, what was
 * removed or changed, and what belongs to an agent that is no longer
 * active) and claims free rows, up to `maxConnections`. With several
 * instances on one database each connection has one holder; when a holder
 * dies its leases lapse (CHANNEL_LEASE_MS) and the next tick elsewhere
 * takes over. Failed connects back off exponentially with jitter; refused
 * credentials halt the row (state `error`) until they change.
 */
export interface SupervisorOptions {
  holder?: string
  tickMs?: number
  maxConnections?: number
  /** Public https base URL for pushed updates; undefined means the channels poll. */
  publicUrl?: string
  /** Base URL of each channel's API (TELEGRAM_API_URL, ...). */
  apiBaseUrls?: Record<string, string | undefined>
}

interface HeldConnection {
  row: ChannelRow
  plugin: ChannelPlugin
  abort: AbortController
  session?: ChannelSession
  /** Connect in progress. */
  pending?: Promise<void>
  /** The credentials in use, to mask them in anything logged. */
  credentials?: Record<string, unknown>
}

const BACKOFF_BASE_MS = 2000
const BACKOFF_MAX_MS = 5 * 60_000

/** Exponential backoff with ±50 % jitter, so reconnecting instances do not stampede. */
export function backoffMs(failures: number): number {
  const base = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** Math.min(failures, 16))
  return Math.round(base * (0.5 + Math.random()))
}

/** Credentials and allowlist of one channel from the agent's current config. */
async function credentialsFor(agentId: string, channel: string) {
  const agent = await Agent.find(agentId)
  if (!agent) return undefined
  return channelSettings(decryptSecrets(agent.config)).get(channel)?.credentials ?? {}
}

export class ChannelSupervisor {
  readonly holder: string
  readonly #held = new Map<string, HeldConnection>()
  readonly #options: Required<Omit<SupervisorOptions, 'publicUrl' | 'holder'>> &
    Pick<SupervisorOptions, 'publicUrl'>
  #timer?: NodeJS.Timeout
  #ticking?: Promise<void>
  #stopped = false
  #started = false

  constructor(options: SupervisorOptions = {}) {
    this.holder = options.holder ?? INSTANCE_ID
    this.#options = {
      tickMs: options.tickMs ?? 5000,
      maxConnections: options.maxConnections ?? 500,
      publicUrl: options.publicUrl,
      apiBaseUrls: options.apiBaseUrls ?? {},
    }
  }

  start() {
    this.#stopped = false
    this.#started = true
    if (this.#timer) return
    this.#timer = setInterval(() => this.poke(), this.#options.tickMs)
    this.#timer.unref()
    this.poke()
  }

  /** Runs a tick now (after a config change or a pairing request) when started, unless one runs. */
  poke(): Promise<void> {
    if (this.#stopped || !this.#started) return Promise.resolve()
    this.#ticking ??= this.tick()
      .catch((error) => logger.warn({ err: error }, 'channels: supervisor tick failed'))
      .finally(() => (this.#ticking = undefined))
    return this.#ticking
  }

  /** Ids of the rows this supervisor holds a connection for. */
  heldIds(): string[] {
    return [...this.#held.keys()]
  }

  /** The live session of a row, when this instance holds it. */
  sessionOf(rowId: string): ChannelSession | undefined {
    return this.#held.get(rowId)?.session
  }

  async tick() {
    const kept = await renewRows(this.holder, this.heldIds())
    for (const [id, held] of this.#held) {
      const renewed = kept.get(id)
      if (!renewed) await this.#drop(id, held, { state: 'disconnected' })
      else if (renewed.fingerprint !== held.row.fingerprint) {
        await this.#drop(id, held, { state: 'connecting' })
      }
    }
    const room = this.#options.maxConnections - this.#held.size
    if (this.#stopped || room <= 0) return
    const claimed = await claimFreeRows(this.holder, room)
    for (const row of claimed) {
      const plugin = plugins.findChannel(row.channel)
      if (!plugin) {
        await releaseRow(row.id, this.holder, {
          state: 'error',
          error: `The ${row.channel} channel is not installed on this service`,
          halt: true,
        })
        continue
      }
      const held: HeldConnection = { row, plugin, abort: new AbortController() }
      this.#held.set(row.id, held)
      held.pending = this.#connect(held).finally(() => (held.pending = undefined))
    }
  }

  /** Closes every connection and frees the leases (shutdown). */
  async stop() {
    this.#stopped = true
    this.#started = false
    if (this.#timer) clearInterval(this.#timer)
    this.#timer = undefined
    await this.#ticking
    await Promise.all(
      [...this.#held].map(([id, held]) => this.#drop(id, held, { state: 'connecting' }))
    )
  }

  /** Simulates this instance dying: connections end, leases are left to lapse. */
  async abandon() {
    this.#stopped = true
    this.#started = false
    if (this.#timer) clearInterval(this.#timer)
    this.#timer = undefined
    await this.#ticking
    for (const [id, held] of this.#held) {
      this.#held.delete(id)
      held.abort.abort()
      await held.pending?.catch(() => {})
      await held.session?.close('handover').catch(() => {})
    }
  }

  /** The context a connector gets for one row (also built for webhook bodies on any instance). */
  async contextFor(
    row: ChannelRow,
    plugin: ChannelPlugin,
    signal: AbortSignal,
    report: (report: ChannelStateReport) => void
  ): Promise<ChannelConnectContext> {
    const credentials = (await credentialsFor(row.agent_id, row.channel)) ?? {}
    const publicUrl = this.#options.publicUrl
    return {
      agentId: row.agent_id,
      credentials,
      apiBaseUrl: this.#options.apiBaseUrls[row.channel],
      webhookUrl:
        publicUrl && plugin.webhook
          ? `${publicUrl}/channels/webhooks/${row.id}/${await webhookSecretOf(row)}`
          : undefined,
      store: rowStore(row.id),
      receive: async (message, replier) => {
        await routeInbound(row.agent_id, plugin, message, replier)
      },
      report,
      signal,
      log: (message, detail) =>
        logger.info(
          {
            agentId: row.agent_id,
            channel: row.channel,
            detail: detail ? safeErrorText(JSON.stringify(detail), credentials) : undefined,
          },
          message
        ),
    }
  }

  async #connect(held: HeldConnection) {
    const { row, plugin, abort } = held
    const report = (update: ChannelStateReport) => this.#onReport(row.id, held, update)
    let context: ChannelConnectContext | undefined
    try {
      context = await this.contextFor(row, plugin, abort.signal, report)
      held.credentials = context.credentials
      await writeReport(row.id, this.holder, { state: 'connecting' })
      const session = await plugin.connect(context)
      if (abort.signal.aborted || this.#held.get(row.id) !== held) {
        await session.close('handover').catch(() => {})
        return
      }
      held.session = session
      // Pairing channels report `qr_pending` or `connected` themselves.
      if (plugin.connectsBy === 'config') {
        await this.#onReport(row.id, held, { state: 'connected', identity: session.identity })
      }
    } catch (error) {
      if (this.#held.get(row.id) !== held) return
      this.#held.delete(row.id)
      abort.abort()
      const message = safeErrorText(error, context?.credentials ?? {})
      if (error instanceof ChannelAuthError) {
        await releaseRow(row.id, this.holder, { state: 'error', error: message, halt: true })
        await this.#feed(row, `${row.channel}: the credentials were refused (${message})`, 'error')
      } else {
        logger.warn(
          { agentId: row.agent_id, channel: row.channel, error: message },
          'channels: connect failed'
        )
        await releaseRow(row.id, this.holder, {
          state: 'connecting',
          error: message,
          retryInMs: backoffMs(row.failures),
        })
      }
    }
  }

  async #onReport(id: string, held: HeldConnection, update: ChannelStateReport) {
    if (this.#held.get(id) !== held) return
    const previous = held.row.state
    try {
      if (!(await writeReport(id, this.holder, update))) return
    } catch (error) {
      logger.warn({ err: error, channel: held.row.channel }, 'channels: a state report was lost')
      return
    }
    held.row = { ...held.row, state: update.state }
    if (update.state !== previous) {
      if (update.state === 'connected') {
        const who = Object.values(update.identity ?? {})[0]
        await this.#feed(
          held.row,
          `${held.row.channel} connected${who ? ` as ${who}` : ''}`,
          'status_change'
        )
      } else if (update.state === 'error' || update.state === 'logged_out') {
        await this.#feed(
          held.row,
          `${held.row.channel} ${update.state === 'logged_out' ? 'was logged out' : 'failed'}${update.error ? `: ${update.error}` : ''}`,
          'error'
        )
      }
    }
    // A logged-out session or refused credentials end the connection for good.
    if (update.state === 'logged_out' || update.state === 'error') {
      await this.#drop(id, held, { state: update.state, error: update.error ?? null, halt: true })
    }
  }

  async #drop(
    id: string,
    held: HeldConnection,
    update: Parameters<typeof releaseRow>[2] & { state: ChannelRow['state'] }
  ) {
    if (this.#held.get(id) !== held) return
    this.#held.delete(id)
    held.abort.abort()
    await held.pending?.catch(() => {})
    const reason = update.state === 'disconnected' ? 'removed' : 'handover'
    await held.session
      ?.close(reason)
      .catch((error) =>
        logger.warn(
          { error: safeErrorText(error, held.credentials ?? {}), channel: held.row.channel },
          'channels: closing a connection failed'
        )
      )
    await releaseRow(id, this.holder, update)
    if (held.row.state === 'connected' && update.state !== 'connected') {
      await this.#feed(held.row, `${held.row.channel} disconnected`, 'status_change')
    }
  }

  async #feed(row: ChannelRow, content: string, type: 'status_change' | 'error') {
    await recordFeedEvent(row.agent_id, { type, content }).catch(() => {})
  }
}

export { CHANNEL_LEASE_MS }
