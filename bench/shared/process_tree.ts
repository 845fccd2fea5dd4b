import { readFileSync } from 'node:fs'
import { agentPaths } from '#runtime/agent_paths'
import { ticksPerSecond, treeUsage } from '#runtime/process/proc_stats'
import { readRecord } from '#runtime/process/process_record'

/** CPU seconds (user + system, waited-for children included) of an agent's process tree. */
export async function treeCpuSecs(agentsDir: string, agentId: string): Promise<number> {
  const record = await readRecord(agentPaths(agentsDir, agentId).recordFile)
  if (!record) return Number.NaN
  let ticks = 0
  for (const pid of treeUsage(record.pid).pids) {
    try {
      const text = readFileSync(`/proc/${pid}/stat`, 'utf8')
      const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
      // Fields 14-17 (utime, stime, cutime, cstime); this array starts at field 3.
      ticks += [11, 12, 13, 14].reduce((sum, index) => sum + Number(fields[index]), 0)
    } catch {
      // Exited meanwhile.
    }
  }
  return ticks / ticksPerSecond()
}
