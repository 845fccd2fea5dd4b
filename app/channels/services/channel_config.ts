import { createHash } from 'node:crypto'
import plugins from '#plugins/services/plugins'
import { ValidationException } from '#core/exceptions/api_exceptions'
import type { ChannelPlugin } from '#plugins/types'

/**
 * The `channels` part of an agent's config (CONTRACT.md): one object per
 * channel with its credentials and an optional `allowFrom` (sender ids or
 * handles; absent means everyone). Pairing channels (whatsapp) keep only
 * `allowFrom` here: their session comes from pair-channel.
 */
export interface ChannelSettings {
  credentials: Record<string, unknown>
  /** Lower-cased ids and handles (without a leading @); undefined: everyone. */
  allowFrom?: string[]
  /** sha256 of the credentials: tells a changed token from the same one. */
  fingerprint: string
  /** Credentials are set (a config channel then connects). */
  configured: boolean
}

const ALLOW_FROM_MAX = 500

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

export function installedChannels(): ChannelPlugin[] {
  return plugins.channels()
}

/** The installed channel of this name; 400 naming the installed ones otherwise. */
export function channelPlugin(name: unknown): ChannelPlugin {
  const plugin = typeof name === 'string' ? plugins.findChannel(name) : undefined
  if (!plugin) {
    const known = installedChannels()
      .map((channel) => channel.name)
      .join(', ')
    throw new ValidationException(`channel must be one of: ${known}`)
  }
  return plugin
}

export function normalizeSender(value: string): string {
  return value.trim().replace(/^@/, '').toLowerCase()
}

function fingerprintOf(credentials: Record<string, unknown>): string {
  const sorted = Object.keys(credentials)
    .sort()
    .map((key) => [key, credentials[key]])
  return createHash('sha256').update(JSON.stringify(sorted)).digest('hex')
}

function parseAllowFrom(name: string, value: unknown): string[] | undefined {
  if (value === undefined || value === null) return undefined
  if (
    !Array.isArray(value) ||
    value.length > ALLOW_FROM_MAX ||
    value.some(
      (item) => (typeof item !== 'string' && typeof item !== 'number') || !`${item}`.trim()
    )
  ) {
    throw new ValidationException(
      `config.channels.${name}.allowFrom must be an array of at most ${ALLOW_FROM_MAX} sender ids or handles`
    )
  }
  return value.map((item) => normalizeSender(`${item}`))
}

/**
 * Checks config.channels with each channel plugin; throws a 400 naming the
 * field. Returns the settings of every channel present.
 */
export function channelSettings(config: Record<string, unknown>): Map<string, ChannelSettings> {
  const settings = new Map<string, ChannelSettings>()
  const section = config.channels
  if (section === undefined) return settings
  if (!isObject(section)) throw new ValidationException('config.channels must be an object')
  for (const [name, value] of Object.entries(section)) {
    const plugin = plugins.findChannel(name)
    if (!plugin) {
      throw new ValidationException(
        `config.channels.${name} is not a channel; installed: ${installedChannels()
          .map((channel) => channel.name)
          .join(', ')}`
      )
    }
    if (!isObject(value)) throw new ValidationException(`config.channels.${name} must be an object`)
    const { allowFrom, ...rest } = value
    let credentials: Record<string, unknown> = {}
    const configured = plugin.connectsBy === 'config' && Object.keys(rest).length > 0
    if (configured) {
      try {
        credentials = plugin.validateCredentials(rest)
      } catch (error) {
        throw new ValidationException(`config.channels.${name}: ${(error as Error).message}`)
      }
    }
    settings.set(name, {
      credentials,
      allowFrom: parseAllowFrom(name, allowFrom),
      fingerprint: fingerprintOf(credentials),
      configured,
    })
  }
  return settings
}

/**
 * An error in words with every credential value masked: connector errors
 * may quote a request URL holding a token (grammY's does), and logs and the
 * feed must never carry one. Only the message chain is kept, never the
 * error object.
 */
export function safeErrorText(error: unknown, credentials: Record<string, unknown>): string {
  const parts: string[] = []
  let current: unknown = error
  for (let depth = 0; current && depth < 3; depth++) {
    parts.push(current instanceof Error ? current.message : String(current))
    current =
      (current as { error?: unknown; cause?: unknown }).error ??
      (current as { cause?: unknown }).cause
  }
  let text = parts.join(': ')
  for (const value of Object.values(credentials)) {
    if (typeof value === 'string' && value.length >= 6) text = text.replaceAll(value, '***')
  }
  return text.slice(0, 500)
}
