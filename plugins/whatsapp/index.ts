import { setTimeout as sleep } from 'node:timers/promises'
import makeWASocket, { Browsers, DEFAULT_CONNECTION_CONFIG, type WASocket } from 'baileys'
import { definePlugin } from '#plugins/types'
import { storedAuthState } from './auth_state.ts'
import { connectionStep, phoneOf } from './connection_events.ts'
import { routeMessages } from './messages.ts'

/**
 * WhatsApp through Baileys (WhatsApp Web multi-device). Pairing only:
 * POST pair-channel starts a session whose QR codes are reported (state
 * `qr_pending`); scanning one in WhatsApp (Settings, Linked devices) links
 * it (`connected`, `phone`). The session's keys live in the connection's
 * encrypted store, so a restart or another instance resumes without a new
 * scan. Direct chats are answered (groups are not). WHATSAPP_WEB_URL
 * overrides WhatsApp Web's WebSocket address.
 */
const RECONNECT_MAX_MS = 60_000
/** Reconnects before the first QR or link; beyond, connect fails (and the supervisor backs off). */
const FIRST_CONNECT_ATTEMPTS = 3
const FIRST_CONNECT_TIMEOUT_MS = 30_000

function quietLogger() {
  const logger = DEFAULT_CONNECTION_CONFIG.logger.child({ channel: 'whatsapp' })
  // Its failures reach the owner through the connection's reports; its own log is noise.
  logger.level = 'fatal'
  return logger
}

export default definePlugin({
  kind: 'channel',
  name: 'whatsapp',
  version: '1.0.0',
  description: 'WhatsApp Web multi-device through Baileys, paired by QR code',
  maxMessageLength: 4096,
  connectsBy: 'pairing',

  validateCredentials(credentials) {
    const unknown = Object.keys(credentials)
    if (unknown.length > 0) {
      throw new Error(
        `WhatsApp takes no credentials (${unknown[0]}): pair it with POST pair-channel`
      )
    }
    return {}
  },

  async connect(context) {
    const { state, save } = await storedAuthState(context.store)
    let socket: WASocket | undefined
    let failures = 0
    let settle: { resolve: () => void; reject: (error: Error) => void } | undefined
    const firstState = new Promise<void>((resolve, reject) => (settle = { resolve, reject }))
    const settled = (error?: Error) => {
      if (!settle) return
      if (error) settle.reject(error)
      else settle.resolve()
      settle = undefined
    }

    const open = () => {
      if (context.signal.aborted) return
      const current = makeWASocket({
        auth: state,
        logger: quietLogger(),
        browser: Browsers.ubuntu('Agent Host'),
        markOnlineOnConnect: false,
        syncFullHistory: false,
        ...(process.env.WHATSAPP_WEB_URL ? { waWebSocketUrl: process.env.WHATSAPP_WEB_URL } : {}),
      })
      socket = current
      current.ev.on('creds.update', () => {
        save().catch((error) =>
          context.log('whatsapp: saving keys failed', { error: String(error) })
        )
      })
      current.ev.on('connection.update', async (update) => {
        const step = await connectionStep(update, current.user)
        if (context.signal.aborted || socket !== current) return
        if (step.kind === 'report' || step.kind === 'logged_out') {
          if (step.report.state === 'connected') failures = 0
          context.report(step.report)
          settled()
        } else if (step.kind === 'reconnect') {
          failures++
          if (settle && failures > FIRST_CONNECT_ATTEMPTS) {
            settled(new Error(`WhatsApp Web could not be reached: ${step.reason}`))
            return
          }
          if (!settle) context.report({ state: 'connecting', error: step.reason })
          const delay = step.immediately ? 0 : Math.min(RECONNECT_MAX_MS, 1000 * 2 ** failures)
          await sleep(delay, undefined, { signal: context.signal }).catch(() => {})
          open()
        }
      })
      routeMessages(current, context)
    }

    open()
    const timeout = AbortSignal.any([context.signal, AbortSignal.timeout(FIRST_CONNECT_TIMEOUT_MS)])
    await Promise.race([
      firstState,
      new Promise<never>((_, reject) =>
        timeout.addEventListener(
          'abort',
          () => reject(new Error('WhatsApp Web did not answer in time')),
          { once: true }
        )
      ),
    ]).catch((error) => {
      socket?.end(undefined)
      throw error
    })
    const phone = phoneOf(state.creds.me?.id)
    const identity: Record<string, string> = phone ? { phone } : {}
    return {
      identity,
      async close() {
        socket?.end(undefined)
      },
    }
  },
})
