import { setTimeout as sleep } from 'node:timers/promises'
import type { AgentProcess } from '#runtime/process/agent_process'
import { ticksPerSecond } from '#runtime/process/proc_stats'

/**
 * What a template build and a template start wait for
 * (app/runtime/process/template_starter.ts): the framework answering a path,
 * and the template's framework settling before its dump.
 */

/**
 * A template's framework is dumped once it settled: its processes used less
 * than SETTLE_CPU of a core over SETTLE_WINDOW_MS (or after SETTLE_TIMEOUT_MS
 * anyway). Right after its warm-up turn OpenClaw still verifies its
 * databases in child processes, runs session maintenance in worker threads
 * and refreshes catalogues: a dump then holds that work half done, with its
 * connections and files open, and every copy takes it up again at once
 * after its restore, before it answers.
 */
const SETTLE_CPU = 0.05
const SETTLE_WINDOW_MS = 2_000
const SETTLE_TIMEOUT_MS = 60_000

/** Until the run's processes settle (true) or SETTLE_TIMEOUT_MS passed (false). */
export async function settles(agent: AgentProcess): Promise<boolean> {
  const deadline = Date.now() + SETTLE_TIMEOUT_MS
  let before = agent.cpuTicks()
  while (before !== undefined && Date.now() < deadline) {
    await sleep(SETTLE_WINDOW_MS)
    const now = agent.cpuTicks()
    if (now === undefined) return false
    if ((now - before) / ticksPerSecond() < (SETTLE_CPU * SETTLE_WINDOW_MS) / 1000) return true
    before = now
  }
  return false
}

/** Until GET `url` answers 2xx (true) or the time is up (false; tried at least once). */
export async function answers(url: string, headers: Record<string, string>, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      const response = await fetch(url, { headers, signal: AbortSignal.timeout(2000) })
      await response.body?.cancel()
      if (response.ok) return true
    } catch {
      // Not listening yet.
    }
    if (Date.now() >= deadline) return false
    await sleep(100)
  }
}
