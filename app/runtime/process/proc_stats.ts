import { execFileSync } from 'node:child_process'
import { readFileSync, readdirSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'

/** One line of /proc/<pid>/stat, the fields the supervisor uses. */
export interface ProcStat {
  pid: number
  ppid: number
  pgrp: number
  /** R, S, D, Z (zombie), T, ... */
  state: string
  /** utime + stime, in clock ticks. */
  cpuTicks: number
  /** Start time after boot, in clock ticks: with the pid, identifies a process uniquely. */
  startTime: number
  /** Resident set size, in pages. */
  rssPages: number
}

function systemNumber(name: string, fallback: number): number {
  try {
    const value = Number(execFileSync('getconf', [name], { encoding: 'utf8' }).trim())
    return Number.isFinite(value) && value > 0 ? value : fallback
  } catch {
    return fallback
  }
}

let clockTicks: number | undefined
let pageSize: number | undefined

/** Clock ticks per second (CLK_TCK, 100 on Linux). */
export function ticksPerSecond(): number {
  clockTicks ??= systemNumber('CLK_TCK', 100)
  return clockTicks
}

export function pageBytes(): number {
  pageSize ??= systemNumber('PAGESIZE', 4096)
  return pageSize
}

/** Parses /proc/<pid>/stat text; the command name may hold spaces and parentheses. */
export function parseProcStat(text: string): ProcStat | undefined {
  const open = text.indexOf('(')
  const close = text.lastIndexOf(')')
  if (open < 0 || close < 0) return undefined
  const pid = Number(text.slice(0, open).trim())
  // Fields after the command name start at field 3 (state).
  const fields = text
    .slice(close + 2)
    .trim()
    .split(/\s+/)
  const field = (index: number) => Number(fields[index - 3])
  return {
    pid,
    state: fields[0],
    ppid: field(4),
    pgrp: field(5),
    cpuTicks: field(14) + field(15),
    startTime: field(22),
    rssPages: field(24),
  }
}

export function readProcStat(pid: number): ProcStat | undefined {
  try {
    return parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return undefined
  }
}

/** True while the process exists and is not a zombie. */
export function isAlive(pid: number): boolean {
  const stat = readProcStat(pid)
  return stat !== undefined && stat.state !== 'Z' && stat.state !== 'X'
}

/** The pids of a process's direct children (the kernel's own list of its main thread). */
export function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number)
  } catch {
    return []
  }
}

/** The process's environment as a map, or undefined when it cannot be read. */
export function readProcEnviron(pid: number): Map<string, string> | undefined {
  try {
    const raw = readFileSync(`/proc/${pid}/environ`, 'utf8')
    const env = new Map<string, string>()
    for (const entry of raw.split('\0')) {
      const equals = entry.indexOf('=')
      if (equals > 0) env.set(entry.slice(0, equals), entry.slice(equals + 1))
    }
    return env
  } catch {
    return undefined
  }
}

export function readProcCmdline(pid: number): string[] | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean)
  } catch {
    return undefined
  }
}

let snapshotCache: { at: number; stats: ProcStat[] } | undefined

/** Every live process, cached for a few hundred milliseconds (several agents poll at once). */
export function allProcesses(maxAgeMs = 300): ProcStat[] {
  const now = Date.now()
  if (snapshotCache && now - snapshotCache.at < maxAgeMs) return snapshotCache.stats
  const stats: ProcStat[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    const stat = readProcStat(Number(name))
    if (stat && stat.state !== 'Z' && stat.state !== 'X') stats.push(stat)
  }
  snapshotCache = { at: now, stats }
  return stats
}

/**
 * The agent's processes: the root, everything in its process group, and
 * every descendant (a child that made its own group is still the agent's).
 */
export function processTree(rootPid: number, processes = allProcesses()): ProcStat[] {
  const children = new Map<number, ProcStat[]>()
  for (const stat of processes) {
    const list = children.get(stat.ppid) ?? []
    list.push(stat)
    children.set(stat.ppid, list)
  }
  const members = new Map<number, ProcStat>()
  const queue = processes.filter((stat) => stat.pid === rootPid || stat.pgrp === rootPid)
  while (queue.length) {
    const next = queue.pop()!
    if (members.has(next.pid)) continue
    members.set(next.pid, next)
    queue.push(...(children.get(next.pid) ?? []))
  }
  return [...members.values()]
}

/** CPU ticks and resident bytes of a process tree right now. */
export function treeUsage(rootPid: number): { cpuTicks: number; rssBytes: number; pids: number[] } {
  const tree = processTree(rootPid, allProcesses(0))
  return {
    cpuTicks: tree.reduce((sum, stat) => sum + stat.cpuTicks, 0),
    rssBytes: tree.reduce((sum, stat) => sum + stat.rssPages, 0) * pageBytes(),
    pids: tree.map((stat) => stat.pid),
  }
}

/**
 * Private (anonymous and shared-memory) resident bytes of a process tree:
 * what a checkpoint writes to disk (file-backed pages are not copied).
 */
export function treePrivateBytes(rootPid: number): number {
  let kilobytes = 0
  for (const pid of treeUsage(rootPid).pids) {
    try {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8')
      for (const field of ['RssAnon', 'RssShmem']) {
        kilobytes += Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0)
      }
    } catch {
      // Exited meanwhile.
    }
  }
  return kilobytes * 1024
}

/**
 * A run's CPU over the window since its last reading (or a short fresh
 * window) and its resident memory, from /proc (the process driver's usage).
 */
export class TreeUsageSampler {
  #cpuSample?: { ticks: number; at: number; pid: number }

  /** A new run: its first reading takes a fresh window. */
  reset() {
    this.#cpuSample = undefined
  }

  /** CPU percent (of one core) and memory of the tree under `pid`. */
  async sample(
    pid: number,
    memoryLimitMb: number
  ): Promise<{ cpuPercent: number; memoryMb: number; memoryLimitMb: number }> {
    let first = this.#cpuSample
    const age = first ? Date.now() - first.at : 0
    if (!first || first.pid !== pid || age < 200 || age > 60_000) {
      const now = treeUsage(pid)
      first = { ticks: now.cpuTicks, at: Date.now(), pid }
      await sleep(500)
    }
    const current = treeUsage(pid)
    const at = Date.now()
    this.#cpuSample = { ticks: current.cpuTicks, at, pid }
    const seconds = (at - first.at) / 1000
    const cpuSeconds = Math.max(0, current.cpuTicks - first.ticks) / ticksPerSecond()
    return {
      cpuPercent: seconds > 0 ? Math.round((cpuSeconds / seconds) * 1000) / 10 : 0,
      memoryMb: Math.round((current.rssBytes / 1024 / 1024) * 10) / 10,
      memoryLimitMb,
    }
  }
}
