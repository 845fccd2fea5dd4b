import env from '#start/env'
import { appUrl } from '#config/app'

/**
 * Channels (docs/channels.md). Pushed updates (Telegram's webhook) need an
 * address the channel can reach: APP_URL when it is https and not a local
 * name; otherwise every channel polls.
 */
function publicBaseUrl(url: string): string | undefined {
  const { protocol, hostname } = new URL(url)
  if (protocol !== 'https:') return undefined
  if (/^(localhost|127\.|\[::1\]|0\.0\.0\.0)/.test(hostname) || hostname.endsWith('.local')) {
    return undefined
  }
  return url
}

export const channelsConfig = {
  publicUrl: publicBaseUrl(appUrl),
  /** Base URLs of the channels' APIs; undefined means each client library's default. */
  apiBaseUrls: {
    telegram: env.get('TELEGRAM_API_URL'),
    discord: env.get('DISCORD_API_URL'),
    twitter: env.get('TWITTER_API_URL'),
  } as Record<string, string | undefined>,
  /** Seconds pair-channel waits for the first QR before answering 503. */
  pairingWaitSeconds: 20,
}
