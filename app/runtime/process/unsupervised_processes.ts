import { existsSync } from 'node:fs'
import { readdir } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'
import { agentPaths, type AgentPaths } from '#runtime/agent_paths'
import { waitAtMost } from '#runtime/process/bounded_wait'
import type { ContainerInfo } from '#runtime/types'
import type { AgentProcess } from '#runtime/process/agent_process'
import type { AgentNetworking } from '#runtime/process/agent_network/agent_networking'
import { AgentCgroup, cgroupBases } from '#runtime/process/cgroups'
import { isAlive } from '#runtime/process/proc_stats'
import {
  deleteRecord,
  isRecordedProcessAlive,
  killStrayProcesses,
  markedAgentIdsUnder,
  readRecord,
  type ProcessRecord,
} from '#runtime/process/process_record'
import {
  livingMembers,
  ownGroupChildren,
  signalTree,
  treeMembers,
} from '#runtime/process/run_process'

/**
 * Agent processes no supervisor of this run of the service holds: a live
 * one a previous run started (adopted from its record, or stopped from it),
 * what an interrupted start or delete left behind (found by the agent's
 * marker), and what still runs when the service stops.
 */

/**
 * The live process a previous run of the service left for `agentId`, to
 * adopt; otherwise its stale record goes, and so does what a start that a
 * crash cut between spawn and record left running.
 */
export async function adoptableRecord(
  agentId: string,
  recordFile: string,
  log: (message: string) => void
): Promise<ProcessRecord | undefined> {
  const record = await readRecord(recordFile)
  if (record && isRecordedProcessAlive(record)) return record
  if (record) await deleteRecord(recordFile)
  // A start that a crash cut between spawn and record: never run the agent twice.
  const strays = await killStrayProcesses(agentId)
  if (strays.length > 0) {
    log(`agent ${agentId}: killed stray processes ${strays.join(', ')} of an interrupted start`)
  }
  return undefined
}

/**
 * Stops a recorded process tree that no supervisor holds (left over from a
 * previous run of the service): SIGTERM to its group, SIGKILL after the grace.
 */
export async function killRecordedProcess(record: ProcessRecord, graceMs: number): Promise<void> {
  if (!isRecordedProcessAlive(record)) return
  const members = treeMembers(record.pid)
  signalTree(record.pid, ownGroupChildren(record.pid), 'SIGTERM')
  const deadline = Date.now() + graceMs
  while (isAlive(record.pid) && Date.now() < deadline) await sleep(100)
  const survivors = livingMembers(members)
  if (survivors.length) signalTree(record.pid, survivors, 'SIGKILL')
}

/** Stops what the agent's record names (SIGTERM, SIGKILL after `graceMs`) and drops the record. */
export async function stopRecordedRun(recordFile: string, graceMs: number): Promise<void> {
  const record = await readRecord(recordFile)
  if (record) {
    await killRecordedProcess(record, graceMs)
    await deleteRecord(recordFile)
  }
}

/** Removes the agent's cgroups, where this host has them. */
export async function releaseAgentCgroup(agentId: string): Promise<void> {
  const bases = cgroupBases()
  if (bases) await new AgentCgroup(agentId, bases).release()
}

/**
 * The agent as its supervisor here tells it when it runs here; otherwise
 * (or when the run is another's) as its record tells it, which another
 * instance of the service on this storage may have written.
 */
export async function inspectAgent(
  agentId: string,
  agent: AgentProcess | undefined,
  paths: AgentPaths
): Promise<ContainerInfo> {
  if (agent?.isLive()) return agent.info()
  const recorded = await recordedInfo(agentId, paths)
  return agent && recorded.state !== 'running' ? agent.info() : recorded
}

/** The agent as its folder and record tell it, when this run of the service does not supervise it. */
export async function recordedInfo(agentId: string, paths: AgentPaths): Promise<ContainerInfo> {
  const record = await readRecord(paths.recordFile)
  const alive = record !== undefined && isRecordedProcessAlive(record)
  return {
    agentId,
    driver: 'process',
    // A live process not yet adopted by this run of the service (create() adopts it).
    state: alive ? 'running' : existsSync(paths.root) ? 'stopped' : 'absent',
    containerId: alive ? record.containerId : null,
    framework: record?.framework ?? null,
    baseUrl: alive ? `http://${record.host ?? '127.0.0.1'}:${record.port}` : null,
    startedAt: alive ? new Date(record.startedAt) : null,
    restartCount: alive ? record.restartCount : 0,
    lastError: null,
  }
}

/** The driver's supervised agents, as a sweep sees them. */
export interface SupervisedAgents {
  isLive(agentId: string): boolean
  stop(agentId: string): Promise<void>
  /** Drops its supervisor without stopping anything. */
  forget(agentId: string): void
}

/**
 * Stops the processes of agents not in `keepAgentIds` (their folders,
 * records or markers name them), removes their groups and the network
 * namespaces nothing runs in; the ids of the agents it stopped.
 */
export async function sweepAgents(options: {
  agentsDir: string
  keepAgentIds: string[]
  supervised: SupervisedAgents
  network: AgentNetworking
  log: (message: string) => void
}): Promise<string[]> {
  const { agentsDir, supervised } = options
  const keep = new Set(options.keepAgentIds)
  let names: string[] = []
  try {
    names = await readdir(agentsDir)
  } catch {
    return []
  }
  const stopped: string[] = []
  for (const agentId of names) {
    if (keep.has(agentId)) continue
    let paths
    try {
      paths = agentPaths(agentsDir, agentId)
    } catch {
      continue
    }
    const record = await readRecord(paths.recordFile)
    if (supervised.isLive(agentId) || (record && isRecordedProcessAlive(record))) {
      await supervised.stop(agentId)
      stopped.push(agentId)
    }
    supervised.forget(agentId)
    // Groups of an agent that crashed for good or never started.
    await releaseAgentCgroup(agentId)
  }
  // A delete cut short after its folder went, or a start cut before its
  // record was written, leaves a process no folder or record names.
  for (const agentId of markedAgentIdsUnder(agentsDir)) {
    if (keep.has(agentId) || supervised.isLive(agentId)) continue
    const strays = await killStrayProcesses(agentId)
    if (strays.length === 0) continue
    options.log(`agent ${agentId}: killed processes ${strays.join(', ')} of an agent that is gone`)
    if (!stopped.includes(agentId)) stopped.push(agentId)
  }
  // Namespaces nothing runs in (left by a crash of the service), of this service's agents only:
  // namespaces are host-wide, and another service on the host (another storage) prepares its
  // agents' namespaces before their processes start (a queued start, a wait for a template).
  const ours = new Set(names)
  await options.network.sweep(
    (agentId) => !ours.has(agentId) || (keep.has(agentId) && supervised.isLive(agentId))
  )
  return stopped
}

/** How long a shutdown waits for operations under way (checkpoint, restore) before stopping agents. */
const OPERATIONS_WAIT_MS = 5_000

/**
 * Service shutdown (ProcessDriver.stopAll): operations under way get a few
 * seconds, every agent is stopped (bounded by the grace), then what still
 * carries an agent marker is killed, but for the `spare`d agents (those
 * another instance of the host holds).
 */
export async function stopAllAtShutdown(options: {
  operations: Array<Promise<unknown>>
  stops: () => Array<Promise<void>>
  graceMs: number
  agentsDir: string
  spare?: (agentId: string) => boolean
  log: (message: string) => void
}): Promise<void> {
  await waitAtMost(Promise.allSettled(options.operations), OPERATIONS_WAIT_MS)
  await waitAtMost(Promise.allSettled(options.stops()), options.graceMs + 2_000)
  await killMarkedAtShutdown(options.agentsDir, options.log, options.spare)
}

/**
 * At shutdown, after every agent was stopped: kills whatever still carries
 * an agent marker under `agentsDir` (a run an unfinished operation
 * launched, a restored tree), in up to three rounds.
 */
export async function killMarkedAtShutdown(
  agentsDir: string,
  log: (message: string) => void,
  spare: (agentId: string) => boolean = () => false
): Promise<void> {
  for (let round = 0; round < 3; round++) {
    const left = [...markedAgentIdsUnder(agentsDir)].filter((agentId) => !spare(agentId))
    if (left.length === 0) break
    log(`killing processes of agents still running at shutdown: ${left.join(', ')}`)
    await Promise.allSettled(left.map((agentId) => killStrayProcesses(agentId)))
  }
}
