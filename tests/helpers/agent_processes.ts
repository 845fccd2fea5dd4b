import { readdirSync, readFileSync } from 'node:fs'
import { AGENT_MARKER_VARIABLE } from '#runtime/process/child_env'

const MARKER_PREFIX = `${AGENT_MARKER_VARIABLE}=`

/**
 * Each running process that carries the runtime's agent marker, by agent id
 * (reads /proc); with `under`, only those whose home lies in that folder
 * (one service's agents, whatever else runs on the machine).
 */
export function agentProcesses(under?: string): Map<string, number[]> {
  const byAgent = new Map<string, number[]>()
  const homePrefix = under === undefined ? undefined : `HOME=${under.replace(/\/+$/, '')}/`
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const environ = readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0')
      const marker = environ.find((variable) => variable.startsWith(MARKER_PREFIX))
      if (!marker) continue
      if (homePrefix && !environ.some((variable) => variable.startsWith(homePrefix))) continue
      const agentId = marker.slice(MARKER_PREFIX.length)
      byAgent.set(agentId, [...(byAgent.get(agentId) ?? []), Number(entry)])
    } catch {
      // Gone meanwhile, or not readable.
    }
  }
  return byAgent
}

/** Pids of every process that carries the runtime's marker for this agent. */
export function agentProcessIds(agentId: string): number[] {
  return agentProcesses().get(agentId) ?? []
}
