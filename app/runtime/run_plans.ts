import { BootCancelledError } from '#runtime/capacity/capacity_manager'
import type { ContainerDriver } from '#runtime/types'
import { randomBytes } from 'node:crypto'

/**
 * The run each agent is to have next, by the container id the API
 * answered when it was scheduled (RuntimeService.planRun); until its
 * container starts under that id, status reports it. A start whose run is
 * no longer wanted (stopped, restarted meanwhile) boots nothing.
 */
export class RunPlans {
  readonly #runs = new Map<string, string>()
  /** Agents stopped whose container may still run until the stop is done: its run is not reused. */
  readonly #unwanted = new Set<string>()

  /**
   * The container id a start answers: the run already scheduled or live,
   * else (and always with `fresh`, a restart) a new run's, which its
   * container will carry. Cheap: no container is touched.
   */
  async plan(
    driver: ContainerDriver,
    agentId: string,
    options: { fresh?: boolean } = {}
  ): Promise<string> {
    if (!options.fresh) {
      const scheduled = this.#runs.get(agentId)
      if (scheduled) return scheduled
      const info = await driver.inspect(agentId)
      const live = info.state === 'running' || info.state === 'starting'
      if (live && info.containerId && !this.#unwanted.has(agentId)) {
        this.#runs.set(agentId, info.containerId)
        return info.containerId
      }
    }
    const prefix = driver.name === 'process' ? 'proc' : driver.name
    const runId = `${prefix}-${randomBytes(6).toString('hex')}`
    this.#runs.set(agentId, runId)
    return runId
  }

  /** The id of the run scheduled for the agent and not yet up. */
  scheduled(agentId: string): string | undefined {
    return this.#runs.get(agentId)
  }

  /** No run is wanted any more (a stop). */
  cancel(agentId: string): void {
    this.#runs.delete(agentId)
    this.#unwanted.add(agentId)
  }

  /** The agent's stop (or delete) is done: its live run may be reused again. */
  stopDone(agentId: string): void {
    this.#unwanted.delete(agentId)
  }

  /** Throws BootCancelledError when `runId` was scheduled and is no longer the one wanted. */
  assertWanted(agentId: string, runId: string | undefined) {
    if (runId !== undefined && this.#runs.get(agentId) !== runId) throw new BootCancelledError()
  }

  /** Run `runId` is up (the driver reports it from now on) or failed: no longer scheduled. */
  settled(agentId: string, runId: string | undefined) {
    if (runId !== undefined && this.#runs.get(agentId) === runId) this.#runs.delete(agentId)
  }

  /** Service shutdown: no scheduled run is wanted. */
  clear() {
    this.#runs.clear()
  }
}
