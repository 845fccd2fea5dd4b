import type { ContainerInfo, RuntimeEvent } from '#runtime/types'

/**
 * Docker restarts crashed containers itself (on-failure, bounded): the
 * running agents' containers are inspected every `intervalMs` and a new
 * restart, or Docker giving up on one, is reported as an event.
 */
export class ContainerWatch {
  readonly #watched = new Map<string, { restartCount: number; failed: boolean }>()
  #poller?: NodeJS.Timeout

  constructor(
    private readonly options: {
      inspect: (agentId: string) => Promise<ContainerInfo>
      emit: (event: RuntimeEvent) => void
      log: (message: string) => void
      intervalMs: number
    }
  ) {}

  watch(agentId: string, restartCount: number) {
    this.#watched.set(agentId, { restartCount, failed: false })
    if (this.#poller) return
    this.#poller = setInterval(() => void this.#poll(), this.options.intervalMs)
    this.#poller.unref()
  }

  unwatch(agentId: string) {
    this.#watched.delete(agentId)
  }

  async #poll() {
    for (const [agentId, seen] of this.#watched) {
      try {
        const info = await this.options.inspect(agentId)
        if (info.restartCount > seen.restartCount) {
          seen.restartCount = info.restartCount
          this.options.emit({
            type: 'restarting',
            agentId,
            restartCount: info.restartCount,
            delayMs: 0,
            at: new Date(),
          })
        }
        if (info.state === 'error' && !seen.failed) {
          seen.failed = true
          this.options.emit({
            type: 'error',
            agentId,
            message: `container ${info.lastError ?? 'failed'}; Docker gave up restarting it`,
            restartCount: info.restartCount,
            at: new Date(),
          })
        }
      } catch (error) {
        this.options.log(`docker poll of ${agentId} failed: ${(error as Error).message}`)
      }
    }
  }

  close() {
    if (this.#poller) clearInterval(this.#poller)
    this.#poller = undefined
    this.#watched.clear()
  }
}
