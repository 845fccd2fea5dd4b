import app from '@adonisjs/core/services/app'
import emitter from '@adonisjs/core/services/emitter'
import logger from '@adonisjs/core/services/logger'
import transmit from '@adonisjs/transmit/services/main'
import type { HttpContext } from '@adonisjs/core/http'
import { TICKET_CHANGED } from '#support/services/ticket_service'
import { overviewFigures } from '#console/services/overview_service'
import { isStaff } from '#identity/services/staff_roles'
import { agentMonitoring } from '#console/services/directory'

/**
 * Live console updates over Transmit (SSE):
 * - `console/tickets`: a ticket was opened or changed (the queue refreshes);
 * - `console/overview`: the overview's figures every few seconds;
 * - `console/agents/<id>/monitoring`: an agent's CPU, memory and restarts
 *   every few seconds;
 * - `console/agents/<id>/logs`: new log lines of an agent.
 * Figures are computed and logs followed only while someone watches (on the
 * instance that browser is connected to).
 */
const FIGURES_EVERY_MS = 5_000
const OVERVIEW_CHANNEL = 'console/overview'
const LOG_CHANNEL = /^console\/agents\/([0-9a-f-]{36})\/logs$/
const MONITORING_CHANNEL = /^console\/agents\/([0-9a-f-]{36})\/monitoring$/

const logFollowers = new Map<string, AbortController>()
const figureFeeds = new Map<string, NodeJS.Timeout>()

function staffOnly(ctx: HttpContext) {
  return Boolean(ctx.staff && isStaff(ctx.staff.role))
}

function followLogs(agentId: string, channel: string) {
  if (logFollowers.has(channel)) return
  const controller = new AbortController()
  logFollowers.set(channel, controller)
  void (async () => {
    try {
      const runtime: any = await app.container.make('runtime')
      const lines = await runtime.followLogs(agentId, { tail: 0, signal: controller.signal })
      for await (const line of lines) {
        transmit.broadcast(channel, { line: String(line) })
      }
    } catch (error) {
      if (!controller.signal.aborted) {
        transmit.broadcast(channel, { notice: 'The agent is not running: live logs paused' })
        logger.debug({ agentId, err: error }, 'console: live logs ended')
      }
    } finally {
      if (logFollowers.get(channel) === controller) logFollowers.delete(channel)
    }
  })()
}

function releaseIfUnwatched(channel: string) {
  if (transmit.getSubscribersFor(channel).length > 0) return
  logFollowers.get(channel)?.abort()
  logFollowers.delete(channel)
}

/** Broadcasts `compute()` on `channel` every few seconds until nobody watches it. */
function feedFigures(channel: string, compute: () => Promise<object>) {
  if (figureFeeds.has(channel)) return
  const timer = setInterval(async () => {
    if (transmit.getSubscribersFor(channel).length === 0) {
      clearInterval(timer)
      figureFeeds.delete(channel)
      return
    }
    try {
      transmit.broadcast(channel, JSON.parse(JSON.stringify(await compute())))
    } catch (error) {
      logger.warn({ err: error, channel }, 'console: live figures failed')
    }
  }, FIGURES_EVERY_MS)
  timer.unref()
  figureFeeds.set(channel, timer)
}

export function registerLiveUpdates() {
  transmit.authorize('console/tickets', staffOnly)
  transmit.authorize(OVERVIEW_CHANNEL, staffOnly)
  transmit.authorize('console/agents/:id/logs', staffOnly)
  transmit.authorize('console/agents/:id/monitoring', staffOnly)

  transmit.on('subscribe', ({ channel }) => {
    const match = LOG_CHANNEL.exec(channel)
    if (match) followLogs(match[1], channel)
    const monitored = MONITORING_CHANNEL.exec(channel)
    if (monitored) feedFigures(channel, () => agentMonitoring(monitored[1]))
    if (channel === OVERVIEW_CHANNEL) feedFigures(channel, overviewFigures)
  })
  transmit.on('unsubscribe', ({ channel }) => releaseIfUnwatched(channel))
  transmit.on('disconnect', () => {
    for (const channel of logFollowers.keys()) releaseIfUnwatched(channel)
  })

  emitter.on(TICKET_CHANGED, (change) => transmit.broadcast('console/tickets', { ...change }))
}
