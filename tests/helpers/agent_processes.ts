import { readdirSync, readFileSync } from 'node:fs'
import { AGENT_MARKER_VARIABLE } from '#runtime/process/child_env'

/** Pids of every process that carries the runtime's marker for this agent (reads /proc). */
export function agentProcessIds(agentId: string): number[] {
  const marker = `${AGENT_MARKER_VARIABLE}=${agentId}`
  const pids: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0').includes(marker)) {
        pids.push(Number(entry))
      }
    } catch {
      // Gone meanwhile, or not readable.
    }
  }
  return pids
}
