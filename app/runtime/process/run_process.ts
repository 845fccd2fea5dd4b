import { spawn, type ChildProcess } from 'node:child_process'
import { closeSync, openSync } from 'node:fs'
import { setPriority } from 'node:os'
import type { AgentCgroup } from '#runtime/process/cgroups'
import type { LogFile } from '#runtime/process/log_file'
import { childPids, isAlive, readProcStat, treeUsage } from '#runtime/process/proc_stats'

/**
 * An agent run's processes at the operating system's level: spawned in a
 * process group of their own behind the cgroup gate, at a lower priority,
 * and signalled as a tree.
 */

/**
 * Started in place of the framework when it gets cgroups: waits for one line
 * on stdin (sent once the supervisor has moved this pid into the groups), then
 * execs the framework with the same pid. Nothing of the agent runs outside
 * its groups, whatever it forks early; if the service dies first, stdin
 * closes and nothing starts.
 */
const CGROUP_GATE = ['-c', 'read -r _ && exec "$@" </dev/null', 'agent-cgroup-gate']

export function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  if (signal) return `killed by ${signal}`
  return `exited with code ${code ?? 'unknown'}`
}

export function signalTree(pid: number, pids: number[], signal: NodeJS.Signals) {
  try {
    process.kill(-pid, signal)
  } catch {
    // The group may be gone already.
  }
  for (const member of pids) {
    try {
      process.kill(member, signal)
    } catch {
      // Exited meanwhile.
    }
  }
}

/**
 * The launcher's children in a process group of their own: in the fixed
 * layout the framework is its pid namespace's init, in a session of its own,
 * so the launcher's group does not reach it. Others get the group's signal
 * only (never twice: a second SIGTERM means "force" to some frameworks).
 */
export function ownGroupChildren(pid: number): number[] {
  return childPids(pid).filter((child) => {
    const group = readProcStat(child)?.pgrp
    return group !== undefined && group !== pid
  })
}

/** A process of a tree, told apart from a later one with its pid by its start time. */
export interface TreeMember {
  pid: number
  startTime?: number
}

/** The processes of the tree under `pid` now. */
export function treeMembers(pid: number): TreeMember[] {
  return treeUsage(pid).pids.map((member) => ({
    pid: member,
    startTime: readProcStat(member)?.startTime,
  }))
}

/** The pids of `members` still running (not a later process under a reused pid). */
export function livingMembers(members: TreeMember[]): number[] {
  return members
    .filter(({ pid, startTime }) => isAlive(pid) && readProcStat(pid)?.startTime === startTime)
    .map(({ pid }) => pid)
}

/**
 * Agents run at a lower CPU priority than the service (nice 10, inherited
 * by what they fork), so a framework's heavy boot never starves the API.
 */
export const AGENT_NICENESS = 10

export function lowerPriority(pid: number) {
  try {
    setPriority(pid, AGENT_NICENESS)
  } catch {
    // Gone already: its exit is reported as usual.
  }
}

/**
 * Moves a run spawned behind the cgroup gate into the agent's groups, then
 * opens the gate; a run that cannot join them is killed.
 */
export function passCgroupGate(
  child: ChildProcess,
  pid: number,
  cgroup: AgentCgroup,
  logFile: LogFile
) {
  // A gate that died already must not take the service down with EPIPE.
  child.stdin?.on('error', () => undefined)
  try {
    cgroup.join(pid)
    child.stdin?.end('\n')
  } catch (error) {
    // Never run it outside its limits: this start fails (and is retried as a crash).
    logFile.note(`could not join its cgroups: ${(error as Error).message}`)
    child.kill('SIGKILL')
  }
}

/**
 * The memory watcher, where no cgroup enforces the limit: the tree under
 * `pid` is killed once it holds more than `limitMb` resident.
 */
export function killOverMemory(pid: number, limitMb: number, logFile: LogFile) {
  const usedMb = treeUsage(pid).rssBytes / 1024 / 1024
  if (usedMb > limitMb) {
    logFile.note(`memory ${Math.round(usedMb)} MB over the ${limitMb} MB limit: killing it`)
    signalTree(pid, treeUsage(pid).pids, 'SIGKILL')
  }
}

/**
 * Spawns `launch` in its own process group, output to the agent's log,
 * behind the cgroup gate when the agent has groups (`cgroupGate`); the
 * error when it could not be spawned.
 */
export function spawnRun(
  launch: { command: string; args: string[] },
  options: {
    cwd: string
    uid?: number
    gid?: number
    inheritFiles: string[]
    env: Record<string, string>
    cgroupGate: boolean
    logFile: LogFile
  }
): ChildProcess | Error {
  const cgroup = options.cgroupGate
  const fd = options.logFile.openForChild()
  const inherited: number[] = []
  try {
    for (const file of options.inheritFiles) inherited.push(openSync(file, 'r'))
    return spawn(
      cgroup ? '/bin/sh' : launch.command,
      cgroup ? [...CGROUP_GATE, launch.command, ...launch.args] : launch.args,
      {
        cwd: options.cwd,
        env: options.env,
        uid: options.uid,
        gid: options.gid,
        detached: true,
        stdio: [cgroup ? 'pipe' : 'ignore', fd, fd, ...inherited],
      }
    )
  } catch (error) {
    return error as Error
  } finally {
    closeSync(fd)
    for (const descriptor of inherited) closeSync(descriptor)
  }
}
