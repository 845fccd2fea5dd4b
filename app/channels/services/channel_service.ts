import { timingSafeEqual } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { channelsConfig } from '#config/channels'
import {
  AgentNotRunningException,
  NotFoundException,
  ServiceUnavailableException,
  ValidationException,
} from '#core/exceptions/api_exceptions'
import type Agent from '#agents/models/agent'
import { decryptSecrets } from '#agents/services/config_secrets'
import { updateAgent } from '#agents/services/agent_service'
import { channelPlugin, installedChannels } from '#channels/services/channel_config'
import type { ChannelPlugin } from '#plugins/types'
import {
  deleteRow,
  rowById,
  rowsOfAgent,
  startPairing,
  webhookSecretOf,
} from '#channels/services/channel_rows'
import { channelSupervisor } from '#channels/services/channel_sync'
import type { ChannelState } from '#plugins/types'

/** One channel in channel-status: the spec's `connected` plus detail, state and last error. */
export interface ChannelStatusView {
  connected: boolean
  state: ChannelState
  lastError: string | null
  [detail: string]: unknown
}

/**
 * GET /agents/:id/channel-status: every installed channel, configured or
 * not. (Each route's agent is found and authorized by its controller.)
 */
export async function channelStatus(agent: Agent) {
  const stored = await rowsOfAgent(agent.id)
  const rows = new Map(stored.map((row) => [row.channel, row]))
  const status: Record<string, ChannelStatusView> = {}
  for (const plugin of installedChannels()) {
    const row = rows.get(plugin.name)
    const state: ChannelState = row ? row.state : 'disconnected'
    status[plugin.name] = {
      connected: state === 'connected',
      ...(state === 'connected' ? row!.identity : {}),
      state,
      lastError: row?.last_error ?? null,
    }
  }
  return status
}

function assertCanConnect(agent: Agent) {
  if (agent.status !== 'active') {
    throw new AgentNotRunningException(
      `The agent is ${agent.status}; start it before pairing a channel`
    )
  }
}

/** The channel a pairing names: 400 unless it is installed and pairs by QR code. */
export function pairingChannel(channel: string): ChannelPlugin {
  const plugin = channelPlugin(channel)
  if (plugin.connectsBy !== 'pairing') {
    throw new ValidationException(
      `${channel} does not pair by QR code: set its credentials in config.channels.${channel}`
    )
  }
  return plugin
}

/**
 * POST /agents/:id/pair-channel: starts a QR pairing (a new session) and
 * answers the first QR once the holder of the connection has it.
 */
export async function pairChannel(agent: Agent, plugin: ChannelPlugin) {
  const channel = plugin.name
  assertCanConnect(agent)
  const row = await startPairing(agent.id, channel)
  void channelSupervisor.poke()
  const deadline = Date.now() + channelsConfig.pairingWaitSeconds * 1000
  while (Date.now() < deadline) {
    await sleep(200)
    const current = await rowById(row.id)
    if (!current) throw new NotFoundException(`The ${channel} pairing was cancelled`)
    const expiresIn = current.qr_expires_at
      ? Math.floor((current.qr_expires_at.getTime() - Date.now()) / 1000)
      : 0
    if (current.state === 'qr_pending' && current.qr_code && expiresIn > 0) {
      return { qrCode: current.qr_code, expiresIn }
    }
    if (current.state === 'error' || current.halted) {
      throw new ServiceUnavailableException(
        `The ${channel} pairing failed: ${current.last_error ?? 'unknown error'}`
      )
    }
  }
  throw new ServiceUnavailableException(`The ${channel} pairing did not start in time; try again`)
}

/**
 * POST /agents/:id/disconnect-channel: a configured channel loses its
 * credentials (a new config version, allowFrom kept); a paired one its
 * session. Answers the same when nothing was connected.
 */
export async function disconnectChannel(agent: Agent, plugin: ChannelPlugin) {
  const channel = plugin.name
  if (plugin.connectsBy === 'pairing') {
    await deleteRow(agent.id, channel)
  } else {
    const configured = decryptSecrets(agent.config).channels as
      Record<string, Record<string, unknown>> | undefined
    const current = configured?.[channel]
    if (current) {
      const kept = current.allowFrom === undefined ? null : { allowFrom: current.allowFrom }
      await updateAgent(agent, {
        config: { channels: { [channel]: kept === null ? null : { ...nulls(current), ...kept } } },
        commitMessage: `Disconnected ${channel}`,
      })
    }
    await deleteRow(agent.id, channel)
  }
  void channelSupervisor.poke()
  return { disconnected: channel }
}

/** Every key of `object` set to null (merge-patch removal), so the credentials go. */
function nulls(object: Record<string, unknown>): Record<string, null> {
  return Object.fromEntries(Object.keys(object).map((key) => [key, null]))
}

/**
 * POST /channels/webhooks/:connectionId/:secret: one pushed update of a
 * channel. Any instance handles it (the message is answered at most once
 * whoever receives it); a wrong secret is a 404 like an unknown id.
 */
export async function receiveWebhook(connectionId: string, secret: string, body: unknown) {
  const row = /^[0-9a-f-]{36}$/i.test(connectionId) ? await rowById(connectionId) : undefined
  const plugin = row
    ? installedChannels().find((channel) => channel.name === row.channel)
    : undefined
  if (!row || !plugin?.webhook || !row.webhook_secret) throw new NotFoundException()
  const expected = Buffer.from(await webhookSecretOf(row))
  const given = Buffer.from(secret)
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
    throw new NotFoundException()
  }
  const context = await channelSupervisor.contextFor(
    row,
    plugin,
    new AbortController().signal,
    () => {}
  )
  await plugin.webhook(context, body)
  return { ok: true }
}
