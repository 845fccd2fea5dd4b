import { setTimeout as sleep } from 'node:timers/promises'
import {
  AgentNotRunningException,
  ServiceUnavailableException,
} from '#core/exceptions/api_exceptions'
import type { FrameworkResolver } from '#runtime/runtime_service_types'
import type { ContainerDriver } from '#runtime/types'

/**
 * Resolves once the agent's framework answers 2xx on its readiness path
 * (`onReady` is told the run's container id first). Throws
 * AgentNotRunningException when the container stops or is given up on
 * meanwhile (not while `pending()` says a run is scheduled and not yet up:
 * a restart's new run starts after its old one stopped),
 * ServiceUnavailableException after `timeoutMs`.
 */
export async function untilReady(
  driver: ContainerDriver,
  frameworks: FrameworkResolver,
  agentId: string,
  options: { timeoutMs: number; signal?: AbortSignal; pending?: () => boolean },
  onReady: (containerId: string | null) => void
): Promise<void> {
  const timeoutMs = options.timeoutMs
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    options.signal?.throwIfAborted()
    const info = await driver.inspect(agentId)
    const down = info.state === 'error' || info.state === 'stopped' || info.state === 'absent'
    if (down && !options.pending?.()) {
      throw new AgentNotRunningException(
        info.lastError ? `The agent is not running: ${info.lastError}` : undefined
      )
    }
    if (info.state === 'running' && info.baseUrl && info.framework) {
      const plugin = frameworks.framework(info.framework)
      try {
        const response = await fetch(`${info.baseUrl}${plugin.readinessPath}`, {
          signal: AbortSignal.timeout(3000),
        })
        await response.body?.cancel()
        if (response.ok) {
          onReady(info.containerId)
          return
        }
      } catch {
        // Not listening yet.
      }
    }
    await sleep(250)
  }
  throw new ServiceUnavailableException(
    `The agent did not become ready within ${Math.round(timeoutMs / 1000)}s`
  )
}
