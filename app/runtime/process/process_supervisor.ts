import type { ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { rmSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { AgentPaths } from '#runtime/agent_paths'
import type { ContainerUsage, ContainerInfo, RuntimeEvent } from '#runtime/types'
import { waitAtMost } from '#runtime/process/bounded_wait'
import { CrashRestarts } from '#runtime/process/crash_restarts'
import { LogFile } from '#runtime/process/log_file'
import type { PreparedLaunch, SupervisorSettings } from '#runtime/process/prepared_launch'
import { isAlive, readProcStat, TreeUsageSampler } from '#runtime/process/proc_stats'
import {
  deleteRecord,
  killStrayProcesses,
  isRecordedProcessAlive,
  writeRecord,
  type ProcessRecord,
} from '#runtime/process/process_record'
import { restoredTree, type WatchedRestore } from '#runtime/process/restores'
import {
  describeExit,
  killOverMemory,
  lowerPriority,
  passCgroupGate,
  signalTree,
  spawnRun,
} from '#runtime/process/run_process'

type Emit = (event: RuntimeEvent) => void

/**
 * One agent's supervised run, the machinery under AgentProcess: spawns it
 * (or CRIU's restore) in its own process group with output going straight
 * to its log file, watches it (exit events for our own children, /proc
 * polling for adopted ones, the memory watcher), restarts it after a crash
 * with exponential backoff, gives up after repeated crashes, and ends a
 * run the same way for every stop and sleep.
 */
export class ProcessSupervisor {
  state: ContainerInfo['state'] = 'stopped'
  prepared?: PreparedLaunch
  record?: ProcessRecord
  restartCount = 0
  lastError: string | null = null
  /** The id the next run takes (scheduled by the API before it boots); used once. */
  nextContainerId?: string
  /** No run of it was ever started or adopted (a new agent may start from a template). */
  neverStarted = true
  /** The current run was started from its framework's template (not booted, not woken). */
  startedFromTemplate = false
  readonly logFile: LogFile

  #child?: ChildProcess
  #generation = 0
  /** Set by a stop or sleep: the run's end is no crash. */
  protected stopping = false
  #pollTimer?: NodeJS.Timeout
  readonly #usage = new TreeUsageSampler()
  #exitWaiters: Array<() => void> = []
  /** The memory group's OOM kill count when the current process started. */
  #oomKillsAtStart = 0

  protected readonly restarts: CrashRestarts

  constructor(
    readonly agentId: string,
    readonly paths: AgentPaths,
    protected readonly settings: SupervisorSettings,
    private readonly emit: Emit,
    logMaxBytes: number
  ) {
    this.logFile = new LogFile(paths.logFile, logMaxBytes)
    this.restarts = new CrashRestarts(settings.restart)
  }

  get port(): number | undefined {
    return this.record?.port ?? this.prepared?.port
  }

  /** Where the service reaches the gateway (see PreparedLaunch.gatewayHost). */
  get host(): string {
    return this.record?.host ?? this.prepared?.gatewayHost ?? '127.0.0.1'
  }

  isLive(): boolean {
    return this.state === 'running' || this.state === 'starting' || this.state === 'restarting'
  }

  /** Takes over a process a previous run of the service started. */
  adopt(record: ProcessRecord) {
    this.neverStarted = false
    this.startedFromTemplate = false
    this.record = record
    this.restartCount = record.restartCount
    this.state = 'running'
    this.stopping = false
    this.logFile.note(`adopted running process ${record.pid} after a service restart`)
    this.#startPolling()
  }

  protected assertLaunchesAllowed() {
    if (this.settings.launchesRefused?.()) throw new Error('the service is shutting down')
  }

  protected async spawn(): Promise<void> {
    const prepared = this.prepared
    if (!prepared) throw new Error(`Agent ${this.agentId} has no prepared launch`)
    this.assertLaunchesAllowed()
    const generation = ++this.#generation
    this.state = 'starting'
    this.#usage.reset()

    // A stale checkpoint must never be restored over what this run does.
    if (prepared.checkpoint) await prepared.checkpoint.store.discard()
    const child = this.launch(prepared.launch, {
      cwd: this.paths.workspace,
      uid: prepared.uid,
      gid: prepared.gid,
      inheritFiles: prepared.inheritFiles,
    })
    if (child instanceof Error) {
      this.#onExit(generation, `failed to start: ${child.message}`)
      return
    }
    await this.watch(generation, child, prepared)
  }

  /** A restore begins: a new generation, `starting`, no pid file of an earlier restore. */
  protected async beginRestore(): Promise<{ generation: number; pidFile: string }> {
    const generation = ++this.#generation
    this.state = 'starting'
    this.#usage.reset()
    const pidFile = join(this.paths.runtime, 'restored.pid')
    await rm(pidFile, { force: true })
    return { generation, pidFile }
  }

  /**
   * Spawns `launch` in its own process group, output to the agent's log,
   * behind the cgroup gate when the agent has groups; the error when it
   * could not be spawned.
   */
  protected launch(
    launch: { command: string; args: string[] },
    options: { cwd: string; uid?: number; gid?: number; inheritFiles: string[] }
  ): ChildProcess | Error {
    const prepared = this.prepared!
    // A boot or wake already under way when the service began to stop leaves nothing behind.
    if (this.settings.launchesRefused?.()) return new Error('the service is shutting down')
    return spawnRun(launch, {
      ...options,
      env: prepared.env,
      cgroupGate: prepared.cgroup !== undefined,
      logFile: this.logFile,
    })
  }

  /**
   * Follows a spawned run: exit events, cgroups, its record, `running`.
   * For a restore (`restore` set) it first waits for CRIU to finish: false
   * (and nothing reported) when CRIU ended before it did.
   */
  protected async watch(
    generation: number,
    child: ChildProcess,
    prepared: PreparedLaunch,
    restore?: WatchedRestore
  ): Promise<boolean> {
    const cgroup = prepared.cgroup
    this.#child = child

    let settled = false
    let endReason = ''
    // A restore's own failure is no crash: its exit is reported only once it restored.
    let following = !restore
    const onEnd = (reason: string) => {
      if (settled) return
      settled = true
      endReason = reason
      if (following) this.#onExit(generation, reason)
    }
    child.once('error', (error) => onEnd(`failed to start: ${error.message}`))
    child.once('exit', (code, signal) => onEnd(describeExit(code, signal)))

    if (!child.pid) return false // 'error' follows (command not found)
    lowerPriority(child.pid)
    if (cgroup) {
      this.#oomKillsAtStart = cgroup.oomKills()
      passCgroupGate(child, child.pid, cgroup, this.logFile)
    }
    if (restore) {
      if (!(await restoredTree(child.pid, restore, () => settled))) {
        this.#child = undefined
        return false
      }
      following = true
      if (settled) {
        // Restored, then ended at once: a crash like any other.
        this.#onExit(generation, endReason)
        return true
      }
    }
    const stat = readProcStat(child.pid)
    const containerId = this.nextContainerId ?? `proc-${randomBytes(6).toString('hex')}`
    this.nextContainerId = undefined
    this.record = {
      agentId: this.agentId,
      framework: prepared.framework,
      pid: child.pid,
      startTime: stat?.startTime ?? 0,
      port: prepared.port,
      ...(prepared.gatewayHost ? { host: prepared.gatewayHost } : {}),
      containerId,
      startedAt: new Date().toISOString(),
      restartCount: this.restartCount,
    }
    await writeRecord(this.paths.recordFile, this.record)
    if (settled || generation !== this.#generation) {
      // It ended while the record was being written: do not leave a record of a dead process.
      if (this.record?.pid !== child.pid) await deleteRecord(this.paths.recordFile)
      return true
    }
    this.state = 'running'
    this.startedFromTemplate = restore?.fromTemplate === true
    // Whatever ran now, the next start is no longer the one its last sleep left for it.
    rmSync(this.paths.startsAsNewFile, { force: true })
    this.logFile.note(
      restore?.fromTemplate
        ? `started ${prepared.framework} from its template under process ${child.pid} on ${this.host}:${prepared.port}`
        : restore
          ? `restored ${prepared.framework} from its checkpoint under process ${child.pid} on ${this.host}:${prepared.port}`
          : `started ${prepared.framework} as process ${child.pid} on ${this.host}:${prepared.port}`
    )
    this.emit({
      type: 'started',
      agentId: this.agentId,
      containerId,
      at: new Date(),
      // A template start is a fresh run of the agent (no turn of its own yet), not a wake.
      ...(restore?.fromTemplate ? { fromTemplate: true } : restore ? { restored: true } : {}),
    })
    this.#startPolling()
    return true
  }

  #onExit(generation: number, exitReason: string) {
    if (generation !== this.#generation) return
    let reason = exitReason
    const cgroup = this.prepared?.cgroup
    if (cgroup && cgroup.oomKills() > this.#oomKillsAtStart) {
      reason = `${exitReason}: over its ${this.prepared!.memoryLimitMb} MB memory limit, killed by the kernel`
    }
    const startedAt = this.record ? Date.parse(this.record.startedAt) : Date.now()
    const leader = this.#child?.pid
    this.#child = undefined
    this.record = undefined
    void deleteRecord(this.paths.recordFile)
    const waiters = this.#exitWaiters.splice(0)
    for (const resolve of waiters) resolve()

    if (this.stopping) {
      this.state = 'stopped'
      this.#stopPolling()
      return
    }
    // A crash takes the run's whole process group with its leader, as a container's processes
    // go with it: a framework whose sandbox wrapper died, or what its tools started, must not
    // outlive it (holding the port, running twice after the restart). What left the group is
    // found by the agent's marker. Both die before a restart is scheduled; a stop has its own grace.
    if (leader) signalTree(leader, [], 'SIGKILL')
    void killStrayProcesses(this.agentId)

    this.lastError = reason
    this.logFile.note(`process ${reason}`)
    this.emit({ type: 'exited', agentId: this.agentId, reason, at: new Date() })

    const { restart } = this.settings
    const delayMs = this.restarts.next(startedAt)
    if (delayMs === undefined) {
      this.state = 'error'
      this.#stopPolling()
      this.prepared?.cgroup?.removeIfEmpty()
      const message = `${this.prepared?.framework ?? 'agent'} ${reason}; gave up after ${restart.maxConsecutiveRestarts} restarts in a row`
      this.logFile.note(message)
      this.emit({
        type: 'error',
        agentId: this.agentId,
        message,
        restartCount: this.restartCount,
        at: new Date(),
      })
      return
    }

    this.state = 'restarting'
    this.restartCount++
    this.logFile.note(`restarting in ${delayMs}ms (restart ${this.restartCount})`)
    this.emit({
      type: 'restarting',
      agentId: this.agentId,
      restartCount: this.restartCount,
      delayMs,
      at: new Date(),
    })
    this.restarts.schedule(delayMs, () => {
      if (this.state !== 'restarting' || this.settings.launchesRefused?.()) return
      this.spawn().catch((error) =>
        this.#onExit(this.#generation, `failed to start: ${error.message}`)
      )
    })
  }

  #startPolling() {
    this.#stopPolling()
    this.#pollTimer = setInterval(() => void this.#poll(), this.settings.pollIntervalMs)
    this.#pollTimer.unref()
  }

  #stopPolling() {
    if (this.#pollTimer) clearInterval(this.#pollTimer)
    this.#pollTimer = undefined
  }

  async #poll() {
    try {
      await this.logFile.rotateIfNeeded()
    } catch {
      // The folder may be being removed.
    }
    const record = this.record
    if (!record || this.state !== 'running') return
    // Our own children report their exit; adopted processes are watched through /proc.
    if (!this.#child && !isRecordedProcessAlive(record)) {
      this.#onExit(this.#generation, 'process disappeared')
      return
    }
    // With cgroups the kernel enforces the limit itself.
    const limit = this.prepared?.cgroup ? undefined : this.prepared?.memoryLimitMb
    if (limit) killOverMemory(record.pid, limit, this.logFile)
  }

  /** Resolves once the current run's exit is handled. */
  protected untilExited(): Promise<void> {
    return new Promise<void>((resolve) => this.#exitWaiters.push(resolve))
  }

  /** A stop with no live run: no record, `stopped`, no groups. */
  protected async stoppedWithoutRun() {
    this.#generation++
    this.record = undefined
    await deleteRecord(this.paths.recordFile)
    this.state = 'stopped'
    this.#stopPolling()
    await this.prepared?.cgroup?.release()
  }

  /**
   * Until the run's launcher has exited (at most 5 s): our own child reports
   * it; an adopted process is gone once /proc says so.
   */
  protected async ended(record: ProcessRecord, exited: Promise<void>, reason: string) {
    if (this.#child) {
      await waitAtMost(exited, 5000)
      return
    }
    const deadline = Date.now() + 5000
    while (isAlive(record.pid) && Date.now() < deadline) await sleep(20)
    this.#onExit(this.#generation, reason)
  }

  /** What every stop ends with: no run, no record, no groups. */
  protected async stopped(note: string) {
    this.#generation++
    this.#child = undefined
    this.record = undefined
    await deleteRecord(this.paths.recordFile)
    this.state = 'stopped'
    this.#stopPolling()
    // Whatever left its process group goes too, with the groups.
    await this.prepared?.cgroup?.release()
    this.logFile.note(note)
  }

  /** CPU over the window since the last reading (or a short fresh window) and resident memory. */
  async usage(): Promise<ContainerUsage> {
    const record = this.record
    const memoryLimitMb = this.prepared?.memoryLimitMb ?? 0
    if (!record) return { cpuPercent: 0, memoryMb: 0, memoryLimitMb }
    return this.#usage.sample(record.pid, memoryLimitMb)
  }

  /** Forgets the process without stopping it (service shutdown). */
  detach() {
    this.restarts.cancel()
    this.#stopPolling()
    this.#child?.unref()
    this.#generation++
  }
}
