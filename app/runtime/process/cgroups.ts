import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs'
import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'

/**
 * Per-agent control groups (cgroup v1) for the process driver
 * (docs/runtime.md "Isolation"): each agent's process tree runs in its own
 * memory, cpu and pids groups, so the kernel enforces its memory limit (an
 * allocation beyond it is killed by the kernel's OOM killer, no polling
 * window), its CPU weight and quota, and its process count.
 *
 * The groups are made under the service's own group of each controller
 * (`<mount>/<service's group>/agent-host/<agent id>`), so agents stay inside
 * whatever limits the service itself runs under, as a delegated subtree
 * would. Used only when the service runs as root and the three v1
 * controllers are mounted writable; elsewhere the driver keeps RLIMIT_NPROC
 * and its memory watcher.
 */
const CONTROLLERS = ['memory', 'cpu', 'pids'] as const
type Controller = (typeof CONTROLLERS)[number]
/**
 * The v1 freezer, where it is mounted writable too: a backup's short
 * quiesce (freeze, copy, thaw; docs/backups.md "Consistency"). Optional:
 * without it a backup puts the agent to sleep instead.
 */
const FREEZER = 'freezer'
/** Longest wait for every process of an agent to freeze (one in an uninterruptible wait may not). */
const FREEZE_TIMEOUT_MS = 2_000

/** Agents' CPU weight: half of the default 1024 the service runs with. */
export const AGENT_CPU_SHARES = 512
const CFS_PERIOD_US = 100_000
const GROUP = 'agent-host'

export interface AgentCgroupLimits {
  memoryMb: number
  /** CPU quota in cores; none when unset. */
  cpus?: number
  pids: number
}

/** `<controller>` -> the folder that holds the agents' groups. */
type Bases = Record<Controller, string> & { freezer?: string }

/** Where `controller` is mounted, and the service's own group in it: the agents' folder there. */
function baseOf(controller: string, mountinfo: string, own: string): string | undefined {
  // mountinfo: id parent dev root mountpoint options - fstype source superoptions
  const mount = mountinfo
    .split('\n')
    .map((line) => line.split(' - '))
    .filter(([, tail]) => tail?.startsWith('cgroup '))
    .map(([head, tail]) => ({
      root: head.split(' ')[3],
      point: head.split(' ')[4],
      options: (tail.split(' ')[2] ?? '').split(','),
    }))
    .find(({ options }) => options.includes(controller))
  // /proc/self/cgroup: hierarchy-id:controllers:path
  const path = own
    .split('\n')
    .map((line) => line.split(':'))
    .find(([, controllers]) => controllers?.split(',').includes(controller))?.[2]
  if (!mount || path === undefined) return undefined
  const relative =
    mount.root !== '/' && path.startsWith(mount.root) ? path.slice(mount.root.length) : path
  return join(mount.point, relative, GROUP)
}

/** Where each controller is mounted, and the service's own group in it. */
function findBases(): Bases | undefined {
  let mountinfo: string
  let own: string
  try {
    mountinfo = readFileSync('/proc/self/mountinfo', 'utf8')
    own = readFileSync('/proc/self/cgroup', 'utf8')
  } catch {
    return undefined
  }
  const bases: Partial<Bases> = {}
  for (const controller of CONTROLLERS) {
    const base = baseOf(controller, mountinfo, own)
    if (!base) return undefined
    bases[controller] = base
  }
  bases.freezer = baseOf(FREEZER, mountinfo, own)
  return bases as Bases
}

let probed: Bases | null | undefined

/** The folders agents' groups go in, when this host lets the service make them. */
export function cgroupBases(): Bases | undefined {
  if (probed !== undefined) return probed ?? undefined
  probed = null
  if (process.getuid?.() !== 0) return undefined
  const bases = findBases()
  if (!bases) return undefined
  try {
    // Synchronous, once: the driver knows how it confines agents before its first start.
    for (const controller of CONTROLLERS) mkdirSync(bases[controller], { recursive: true })
    // Agents as a whole weigh half of one of the service's own tasks under contention.
    writeFileSync(join(bases.cpu, 'cpu.shares'), String(AGENT_CPU_SHARES))
  } catch {
    return undefined
  }
  try {
    if (bases.freezer) mkdirSync(bases.freezer, { recursive: true })
  } catch {
    delete bases.freezer
  }
  probed = bases
  return bases
}

/** True when agents get cgroups on this host (root, v1 memory/cpu/pids mounted writable). */
export function cgroupsWritable(): boolean {
  return cgroupBases() !== undefined
}

/**
 * One agent's groups. `apply` makes them (or updates their limits), `join`
 * moves a process into all of them, `freeze` and `thaw` stop and resume
 * them all at once (where the freezer is mounted), `release` kills what is
 * left in them and removes them.
 */
export class AgentCgroup {
  readonly #dirs: Record<Controller, string> & { freezer?: string }

  constructor(
    readonly agentId: string,
    bases: Bases
  ) {
    if (!/^[\w-]+$/.test(agentId)) throw new Error(`Invalid agent id for a cgroup: ${agentId}`)
    this.#dirs = {
      memory: join(bases.memory, agentId),
      cpu: join(bases.cpu, agentId),
      pids: join(bases.pids, agentId),
      ...(bases.freezer ? { freezer: join(bases.freezer, agentId) } : {}),
    }
  }

  /** The group folder of each controller (the freezer's where it is mounted). */
  get dirs(): Readonly<Record<Controller, string> & { freezer?: string }> {
    return this.#dirs
  }

  /** True when this host lets the agent's processes be frozen (a backup's quiesce). */
  get canFreeze(): boolean {
    return this.#dirs.freezer !== undefined
  }

  async apply(limits: AgentCgroupLimits): Promise<void> {
    for (const dir of Object.values(this.#dirs)) await mkdir(dir, { recursive: true })
    // A service that died during a backup's freeze left the run frozen: the next one thaws it.
    await this.thaw()
    const memory = this.#dirs.memory
    const bytes = String(Math.round(limits.memoryMb * 1024 * 1024))
    const memsw = join(memory, 'memory.memsw.limit_in_bytes')
    const swapAccounting = existsSync(memsw)
    // memsw must stay >= the memory limit: lift it first, then set both (any order of old/new).
    if (swapAccounting) await writeFile(memsw, '-1')
    await writeFile(join(memory, 'memory.limit_in_bytes'), bytes)
    // No swap beyond the memory limit, as the docker driver's MemorySwap.
    if (swapAccounting) await writeFile(memsw, bytes)

    const cpu = this.#dirs.cpu
    await writeFile(join(cpu, 'cpu.shares'), String(AGENT_CPU_SHARES))
    const quota = limits.cpus && limits.cpus > 0 ? Math.round(limits.cpus * CFS_PERIOD_US) : -1
    await writeFile(join(cpu, 'cpu.cfs_period_us'), String(CFS_PERIOD_US))
    await writeFile(join(cpu, 'cpu.cfs_quota_us'), String(quota))

    await writeFile(join(this.#dirs.pids, 'pids.max'), String(limits.pids))
  }

  /** Moves a process (and the children it makes from now on) into every group. */
  join(pid: number): void {
    const { freezer, ...limits } = this.#dirs
    for (const dir of Object.values(limits)) {
      writeFileSync(join(dir, 'cgroup.procs'), String(pid))
    }
    try {
      if (freezer) writeFileSync(join(freezer, 'cgroup.procs'), String(pid))
    } catch {
      // Not a limit: a freeze moves the agent's processes in first anyway.
    }
  }

  /**
   * Freezes every process of the agent at once (cgroup v1 freezer): each
   * stops where it stands, between two system calls, and holds its files
   * open as they are; nothing it runs can write until `thaw`. Processes of
   * its memory group not yet in the freezer's (a run adopted from before
   * the freezer was used, a child forked meanwhile) are moved in first.
   * True when frozen; else, with everything running again, why not: this
   * host has no freezer, or not every process froze within FREEZE_TIMEOUT_MS.
   */
  async freeze(): Promise<true | string> {
    const freezer = this.#dirs.freezer
    if (!freezer) return 'no freezer on this host'
    try {
      await mkdir(freezer, { recursive: true })
      for (let round = 0; round < 10; round++) {
        const outside = await this.#outsideFreezer()
        if (outside.length === 0) break
        for (const pid of outside) {
          // ESRCH: exited since the listing.
          await writeFile(join(freezer, 'cgroup.procs'), String(pid)).catch(() => undefined)
        }
      }
      await writeFile(join(freezer, 'freezer.state'), 'FROZEN')
      const deadline = Date.now() + FREEZE_TIMEOUT_MS
      while ((await readState(freezer)) !== 'FROZEN') {
        if (Date.now() > deadline) throw new Error('not every process froze in time')
        await sleep(2)
      }
      // Every process of the agent is in the frozen group, or the copy would not be of one moment.
      const escaped = await this.#outsideFreezer()
      if (escaped.length > 0) throw new Error('a process escaped the freeze')
      return true
    } catch (error) {
      await this.thaw().catch(() => undefined)
      return (error as Error).message
    }
  }

  /** Lets the frozen processes run on (a no-op when they are not frozen or there is no freezer). */
  async thaw(): Promise<void> {
    const freezer = this.#dirs.freezer
    if (!freezer) return
    try {
      await writeFile(join(freezer, 'freezer.state'), 'THAWED')
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
    }
  }

  /** Processes of the agent's memory group that are not in its freezer group. */
  async #outsideFreezer(): Promise<number[]> {
    const inFreezer = new Set(await pidsIn(this.#dirs.freezer!))
    const members = await this.members()
    return members.filter((pid) => !inFreezer.has(pid))
  }

  /** Kills by the kernel's OOM killer in the memory group so far (0 when the kernel does not say). */
  oomKills(): number {
    try {
      const control = readFileSync(join(this.#dirs.memory, 'memory.oom_control'), 'utf8')
      return Number(/^oom_kill (\d+)/m.exec(control)?.[1] ?? 0)
    } catch {
      return 0
    }
  }

  /** Processes still in the memory group. */
  async members(): Promise<number[]> {
    return pidsIn(this.#dirs.memory)
  }

  /**
   * Removes the groups if nothing runs in them (after a crash the agent gave
   * up on), at once: a later start makes them again before it spawns.
   */
  removeIfEmpty(): void {
    for (const dir of Object.values(this.#dirs)) {
      try {
        rmdirSync(dir)
      } catch {
        // Gone already, or something of the agent still runs there: stop/remove ends it.
      }
    }
  }

  /**
   * After a stop: SIGKILLs anything of the agent still running (a process
   * that left its process group), then removes the groups.
   */
  async release(): Promise<void> {
    // A frozen process does not die of SIGKILL until it is thawed.
    await this.thaw().catch(() => undefined)
    for (let attempt = 0; attempt < 40; attempt++) {
      const left = await this.members()
      for (const pid of left) {
        try {
          process.kill(pid, 'SIGKILL')
        } catch {
          // Exited meanwhile.
        }
      }
      let busy = false
      for (const dir of Object.values(this.#dirs)) {
        try {
          await rmdir(dir)
        } catch (error) {
          const code = (error as NodeJS.ErrnoException).code
          if (code !== 'ENOENT') busy = true
        }
      }
      if (!busy) return
      await sleep(50)
    }
  }
}

/** The processes (thread group ids) of one group folder; none when it is gone. */
async function pidsIn(dir: string): Promise<number[]> {
  try {
    const text = await readFile(join(dir, 'cgroup.procs'), 'utf8')
    return text.split('\n').filter(Boolean).map(Number)
  } catch {
    return []
  }
}

/** A freezer group's state: THAWED, FREEZING or FROZEN. */
async function readState(dir: string): Promise<string> {
  const text = await readFile(join(dir, 'freezer.state'), 'utf8')
  return text.trim()
}
