import { existsSync } from 'node:fs'
import { readFile, rm } from 'node:fs/promises'
import { writeFileAtomic } from '#core/files/atomic_file'
import { AGENTS_DIR_VARIABLE, AGENT_MARKER_VARIABLE } from '#runtime/process/child_env'
import { allProcesses, isAlive, readProcEnviron, readProcStat } from '#runtime/process/proc_stats'
import { setTimeout as sleep } from 'node:timers/promises'

/** What `runtime/process.json` holds about an agent's live process. */
export interface ProcessRecord {
  agentId: string
  framework: string
  pid: number
  /** From /proc/<pid>/stat: with the pid, names this very process (pids are reused). */
  startTime: number
  port: number
  /** Where the service reaches it, when not 127.0.0.1 (its network namespace's address). */
  host?: string
  containerId: string
  startedAt: string
  restartCount: number
}

export async function readRecord(file: string): Promise<ProcessRecord | undefined> {
  // Most agents a chat looks at have no live process here, so no record: a stat says so
  // without the failed open and its ENOENT error, which cost the chat path about half a
  // millisecond of main-thread time on every message.
  if (!existsSync(file)) return undefined
  try {
    const record = JSON.parse(await readFile(file, 'utf8')) as ProcessRecord
    return typeof record.pid === 'number' && typeof record.port === 'number' ? record : undefined
  } catch {
    return undefined
  }
}

/** Written aside and renamed: another instance reading it never sees half a record. */
export async function writeRecord(file: string, record: ProcessRecord): Promise<void> {
  await writeFileAtomic(file, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 })
}

export async function deleteRecord(file: string): Promise<void> {
  await rm(file, { force: true })
}

/**
 * True when the recorded process is alive and is the agent's: same pid and
 * start time, and its environment carries the agent's marker. The command
 * line is not compared: frameworks rename their process (OpenClaw shows as
 * "openclaw-gateway"), the environment stays.
 */
export function isRecordedProcessAlive(record: ProcessRecord): boolean {
  const stat = readProcStat(record.pid)
  if (!stat || stat.state === 'Z' || stat.state === 'X') return false
  if (stat.startTime !== record.startTime) return false
  const environ = readProcEnviron(record.pid)
  if (environ && environ.get(AGENT_MARKER_VARIABLE) !== record.agentId) return false
  return true
}

/**
 * Live processes carrying the agent's marker. With no live recorded
 * process these are strays: a crash between spawning an agent and writing
 * its record leaves one running that no record names.
 */
export function markedProcesses(agentId: string): number[] {
  return allProcesses(0)
    .filter((stat) => readProcEnviron(stat.pid)?.get(AGENT_MARKER_VARIABLE) === agentId)
    .map((stat) => stat.pid)
}

/**
 * Agent ids of live marked processes whose home lies under `agentsDir`:
 * this service's agents, whatever records or folders a crash left (another
 * service on the host keeps its agents elsewhere).
 */
export function markedAgentIdsUnder(agentsDir: string): Set<string> {
  const ids = new Set<string>()
  const prefix = `${agentsDir.replace(/\/+$/, '')}/`
  for (const stat of allProcesses(0)) {
    const environ = readProcEnviron(stat.pid)
    const agentId = environ?.get(AGENT_MARKER_VARIABLE)
    const underIt =
      environ?.get('HOME')?.startsWith(prefix) ||
      `${environ?.get(AGENTS_DIR_VARIABLE)?.replace(/\/+$/, '')}/` === prefix
    if (agentId && underIt) ids.add(agentId)
  }
  return ids
}

/** Kills the agent's stray processes (see markedProcesses) and waits until they are gone. */
export async function killStrayProcesses(agentId: string): Promise<number[]> {
  const strays = markedProcesses(agentId)
  for (const pid of strays) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // Gone meanwhile.
    }
  }
  const deadline = Date.now() + 5000
  while (strays.some(isAlive) && Date.now() < deadline) await sleep(25)
  return strays
}
