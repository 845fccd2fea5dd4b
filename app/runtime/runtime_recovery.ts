import { BootCancelledError, type BootPriority } from '#runtime/capacity/capacity_manager'
import type { AgentRuntimeSpec, ContainerDriver } from '#runtime/types'

export interface RecoverOptions {
  sweep?: boolean
  /** More agents the sweep leaves alone (those other instances of the host hold). */
  keep?: string[]
  /** Runs each agent's start (the agents area orders it with the agent's other operations). */
  each?: (agentId: string, start: () => Promise<void>) => Promise<void>
}

export interface RecoveryResult {
  adopted: string[]
  started: string[]
  failed: Array<{ agentId: string; error: string }>
  swept: string[]
}

/**
 * At service boot: for every agent that should be running, adopt its live
 * container or start it again; stop containers of agents that no longer
 * exist. Failures are reported per agent, never thrown. `planRun` and
 * `startOrAdopt` are the runtime service's.
 */
export async function recoverAgents(
  specs: AgentRuntimeSpec[],
  options: RecoverOptions,
  service: {
    driver: ContainerDriver
    planRun(agentId: string): Promise<string>
    startOrAdopt(
      spec: AgentRuntimeSpec,
      runId: string,
      priority: BootPriority
    ): Promise<{ adopted: boolean }>
  }
): Promise<RecoveryResult> {
  const result = {
    adopted: [] as string[],
    started: [] as string[],
    failed: [] as Array<{ agentId: string; error: string }>,
    swept: [] as string[],
  }
  if (options.sweep !== false) {
    const keep = [...specs.map((spec) => spec.agentId), ...(options.keep ?? [])]
    result.swept = await service.driver.sweep(keep)
  }
  const each = options.each ?? ((_agentId, start) => start())
  // Through the capacity manager like any start: a restart of the service
  // boots its agents a few at a time within the memory budget, not all at once.
  await Promise.all(
    specs.map(async (spec) => {
      // A planned run, like an owner's start: a stop or delete arriving meanwhile cancels it.
      const runId = await service.planRun(spec.agentId)
      try {
        await each(spec.agentId, async () => {
          // Background: nobody waits on it yet (a message makes it interactive).
          const { adopted } = await service.startOrAdopt(spec, runId, 'background')
          ;(adopted ? result.adopted : result.started).push(spec.agentId)
        })
      } catch (error) {
        // Stopped or removed while it waited: not a failure.
        if (error instanceof BootCancelledError) return
        result.failed.push({ agentId: spec.agentId, error: (error as Error).message })
      }
    })
  )
  return result
}
