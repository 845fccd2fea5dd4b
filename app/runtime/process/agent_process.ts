import { setPriority } from 'node:os'
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs'
import { copyFile, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { ProcessLaunch } from '#plugins/types'
import type { AgentPaths } from '#runtime/agent_paths'
import type { ContainerInfo, ContainerUsage, RuntimeEvent } from '#runtime/types'
import type { AgentCgroup } from '#runtime/process/cgroups'
import {
  lastErrors,
  restoreCommand,
  type AgentCheckpoint,
  type NamedMount,
} from '#runtime/process/checkpoint'
import type { TemplateFallback } from '#runtime/process/template'
import { LogFile } from '#runtime/process/log_file'
import {
  childPids,
  isAlive,
  readProcStat,
  ticksPerSecond,
  treePrivateBytes,
  treeUsage,
} from '#runtime/process/proc_stats'
import {
  deleteRecord,
  killStrayProcesses,
  isRecordedProcessAlive,
  writeRecord,
  type ProcessRecord,
} from '#runtime/process/process_record'

/** How the supervisor restarts a crashed agent. */
export interface RestartPolicy {
  /** First delay; doubles after each consecutive crash. */
  baseDelayMs: number
  maxDelayMs: number
  /** Consecutive crashes restarted before the agent is given up on (`error`). */
  maxConsecutiveRestarts: number
  /** A run at least this long resets the consecutive-crash count. */
  stableAfterMs: number
}

export interface SupervisorSettings {
  restart: RestartPolicy
  stopGraceMs: number
  pollIntervalMs: number
  /** True once the service is stopping: no run is launched any more (boot, wake, crash restart). */
  launchesRefused?: () => boolean
}

/** What the driver prepared for the next (re)start. */
export interface PreparedLaunch {
  framework: string
  launch: ProcessLaunch
  /** The agent's own user and group id (app/runtime/process/sandbox.ts); unset: the service's. */
  uid?: number
  gid?: number
  env: Record<string, string>
  port: number
  /**
   * Where the service reaches the gateway: the agent's address in its own
   * network namespace (app/runtime/process/agent_network); unset: 127.0.0.1.
   */
  gatewayHost?: string
  memoryLimitMb: number
  /**
   * The agent's own cgroups (app/runtime/process/cgroups.ts): the kernel
   * enforces its limits, so the memory watcher stands down. Unset where
   * cgroups are not writable.
   */
  cgroup?: AgentCgroup
  /** Files opened read-only as descriptors 3, 4, … at each spawn (the sandbox's seccomp program). */
  inheritFiles: string[]
  /**
   * Where a sleep checkpoints the agent and a wake restores it
   * (app/runtime/process/checkpoint.ts); unset where that cannot work.
   */
  checkpoint?: {
    store: AgentCheckpoint
    /** The sandbox's root folder, restored on top of. */
    rootDir: string
    /** The agent's uid, which CRIU runs with. */
    uid: number
    /** This launch's fingerprint: a checkpoint of another launch is never restored. */
    fingerprint: string
    /** Runs CRIU inside the agent's network namespace, where the launch ran (when it has one). */
    enter?: Wrap
    /** The fixed layout's binds, which CRIU records and restores by name. */
    mounts?: NamedMount[]
  }
  /**
   * A new agent's first start from a template checkpoint
   * (app/runtime/process/template.ts); used once, then unset.
   */
  template?: TemplateStart
}

/** What a start from a template needs of the driver. */
export interface TemplateStart {
  /** The agent's own copy of the images, or why it cannot have one (then a counted cold boot). */
  copy(): Promise<{ dir: string } | { fallback: TemplateFallback; reason: string }>
  /**
   * After CRIU restored the copy (the framework is `pid`): makes the framework
   * take the agent's own token; an error message when it did not.
   */
  personalise(pid: number): Promise<string | undefined>
  /** How this start went: restored, or the reason it booted cold. */
  report(outcome: 'restored' | TemplateFallback, reason?: string): void
}

/**
 * Started in place of the framework when it gets cgroups: waits for one line
 * on stdin (sent once the supervisor has moved this pid into the groups), then
 * execs the framework with the same pid. Nothing of the agent runs outside
 * its groups, whatever it forks early; if the service dies first, stdin
 * closes and nothing starts.
 */
const CGROUP_GATE = ['-c', 'read -r _ && exec "$@" </dev/null', 'agent-cgroup-gate']

type Emit = (event: RuntimeEvent) => void
type Wrap = (launch: { command: string; args: string[] }) => { command: string; args: string[] }

/** Longest a restore may take before it counts as failed (a restore of 1 GB takes ~1-2 s). */
const RESTORE_TIMEOUT_MS = 30_000

function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  if (signal) return `killed by ${signal}`
  return `exited with code ${code ?? 'unknown'}`
}

function signalTree(pid: number, pids: number[], signal: NodeJS.Signals) {
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
function ownGroupChildren(pid: number): number[] {
  return childPids(pid).filter((child) => {
    const group = readProcStat(child)?.pgrp
    return group !== undefined && group !== pid
  })
}

/**
 * Stops a recorded process tree that no supervisor holds (left over from a
 * previous run of the service): SIGTERM to its group, SIGKILL after the grace.
 */
export async function killRecordedProcess(record: ProcessRecord, graceMs: number): Promise<void> {
  if (!isRecordedProcessAlive(record)) return
  const members = treeUsage(record.pid).pids.map((pid) => ({
    pid,
    startTime: readProcStat(pid)?.startTime,
  }))
  signalTree(record.pid, ownGroupChildren(record.pid), 'SIGTERM')
  const deadline = Date.now() + graceMs
  while (isAlive(record.pid) && Date.now() < deadline) await sleep(100)
  const survivors = members
    .filter(({ pid, startTime }) => isAlive(pid) && readProcStat(pid)?.startTime === startTime)
    .map(({ pid }) => pid)
  if (survivors.length) signalTree(record.pid, survivors, 'SIGKILL')
}

/**
 * One agent's supervised framework process: spawns it in its own process
 * group with output going straight to its log file, watches it (exit events
 * for our own children, /proc polling for adopted ones), restarts it after
 * a crash with exponential backoff, gives up after repeated crashes, and
 * stops it with SIGTERM then SIGKILL.
 */
/**
 * Agents run at a lower CPU priority than the service (nice 10, inherited
 * by what they fork), so a framework's heavy boot never starves the API.
 */
export const AGENT_NICENESS = 10

function lowerPriority(pid: number) {
  try {
    setPriority(pid, AGENT_NICENESS)
  } catch {
    // Gone already: its exit is reported as usual.
  }
}

export class AgentProcess {
  state: ContainerInfo['state'] = 'stopped'
  prepared?: PreparedLaunch
  record?: ProcessRecord
  restartCount = 0
  lastError: string | null = null
  /** The id the next run takes (scheduled by the API before it boots); used once. */
  nextContainerId?: string
  /** No run of it was ever started or adopted (a new agent may start from a template). */
  neverStarted = true
  readonly logFile: LogFile

  #child?: ChildProcess
  #generation = 0
  #consecutiveCrashes = 0
  #stopping = false
  #restartTimer?: NodeJS.Timeout
  #pollTimer?: NodeJS.Timeout
  #cpuSample?: { ticks: number; at: number; pid: number }
  #exitWaiters: Array<() => void> = []
  /** The memory group's OOM kill count when the current process started. */
  #oomKillsAtStart = 0

  constructor(
    readonly agentId: string,
    readonly paths: AgentPaths,
    private readonly settings: SupervisorSettings,
    private readonly emit: Emit,
    logMaxBytes: number
  ) {
    this.logFile = new LogFile(paths.logFile, logMaxBytes)
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

  info(): ContainerInfo {
    const live = this.state === 'running' || this.state === 'starting'
    return {
      agentId: this.agentId,
      driver: 'process',
      state: this.state,
      containerId: this.record?.containerId ?? null,
      framework: this.prepared?.framework ?? this.record?.framework ?? null,
      baseUrl: live && this.port ? `http://${this.host}:${this.port}` : null,
      startedAt: live && this.record ? new Date(this.record.startedAt) : null,
      restartCount: this.restartCount,
      lastError: this.lastError,
    }
  }

  /** Takes over a process a previous run of the service started. */
  adopt(record: ProcessRecord) {
    this.neverStarted = false
    this.record = record
    this.restartCount = record.restartCount
    this.state = 'running'
    this.#stopping = false
    this.logFile.note(`adopted running process ${record.pid} after a service restart`)
    this.#startPolling()
  }

  /** An explicit start: a fresh count of crashes and restarts. */
  async start(): Promise<void> {
    if (this.isLive()) return
    this.neverStarted = false
    this.restartCount = 0
    this.#consecutiveCrashes = 0
    this.lastError = null
    this.#stopping = false
    if (await this.#restore()) return
    if (await this.#fromTemplate()) return
    await this.#spawn()
  }

  #assertLaunchesAllowed() {
    if (this.settings.launchesRefused?.()) throw new Error('the service is shutting down')
  }

  async #spawn(): Promise<void> {
    const prepared = this.prepared
    if (!prepared) throw new Error(`Agent ${this.agentId} has no prepared launch`)
    this.#assertLaunchesAllowed()
    const generation = ++this.#generation
    this.state = 'starting'
    this.#cpuSample = undefined

    // A stale checkpoint must never be restored over what this run does.
    if (prepared.checkpoint) await prepared.checkpoint.store.discard()
    const child = this.#launch(prepared.launch, {
      cwd: this.paths.workspace,
      uid: prepared.uid,
      gid: prepared.gid,
      inheritFiles: prepared.inheritFiles,
    })
    if (child instanceof Error) {
      this.#onExit(generation, `failed to start: ${child.message}`)
      return
    }
    await this.#watch(generation, child, prepared)
  }

  /**
   * Wakes the agent from its checkpoint. False, with nothing left running,
   * when there is none for this launch or CRIU could not restore it (the
   * caller boots it instead).
   */
  async #restore(): Promise<boolean> {
    const prepared = this.prepared
    const checkpoint = prepared?.checkpoint
    if (!prepared || !checkpoint) return false
    const meta = await checkpoint.store.meta()
    if (!meta) return false
    // Kept for the next wake: a stopping service restores nothing.
    this.#assertLaunchesAllowed()
    if (meta.fingerprint !== checkpoint.fingerprint || meta.port !== prepared.port) {
      this.logFile.note(
        'its checkpoint is of an older launch (config, skills or port changed): booting'
      )
      await checkpoint.store.discard()
      return false
    }
    const { generation, pidFile } = await this.#beginRestore()
    const unpackError = await checkpoint.store.unpack()
    if (unpackError) {
      this.logFile.note(`could not unpack its checkpoint (${unpackError}): booting`)
      await checkpoint.store.discard()
      return false
    }
    const child = this.#launchRestore(checkpoint.store.dir, checkpoint, pidFile)
    const restored =
      !(child instanceof Error) && (await this.#watch(generation, child, prepared, { pidFile }))
    if (restored) {
      await checkpoint.store.consume()
      return true
    }
    const reason = child instanceof Error ? child.message : await checkpoint.store.restoreErrors()
    this.logFile.note(`could not restore its checkpoint (${reason}): booting`)
    await checkpoint.store.discard()
    return false
  }

  /** A restore begins: a new generation, `starting`, no pid file of an earlier restore. */
  async #beginRestore(): Promise<{ generation: number; pidFile: string }> {
    const generation = ++this.#generation
    this.state = 'starting'
    this.#cpuSample = undefined
    const pidFile = join(this.paths.runtime, 'restored.pid')
    await rm(pidFile, { force: true })
    return { generation, pidFile }
  }

  /** CRIU restoring the images in `dir` into the agent's sandbox, uid, mounts and namespace. */
  #launchRestore(
    dir: string,
    checkpoint: NonNullable<PreparedLaunch['checkpoint']>,
    pidFile: string
  ) {
    const command = restoreCommand(dir, {
      uid: checkpoint.uid,
      rootDir: checkpoint.rootDir,
      pidFile,
      mounts: checkpoint.mounts,
    })
    return this.#launch(checkpoint.enter?.(command) ?? command, {
      cwd: this.paths.runtime,
      inheritFiles: [],
    })
  }

  /**
   * A new agent's first start from its framework's template: CRIU restores
   * the agent's own copy of the images into its sandbox, then the framework
   * takes its own token. False, with nothing left running, when it could
   * not (the caller boots it; the driver counts why).
   */
  async #fromTemplate(): Promise<boolean> {
    const prepared = this.prepared
    const template = prepared?.template
    const checkpoint = prepared?.checkpoint
    if (!prepared || !template) return false
    // Only ever the first start: a later boot (a crash restart, a wake) boots.
    prepared.template = undefined
    if (!checkpoint) return false
    this.#assertLaunchesAllowed()
    const began = Date.now()
    const copy = await template.copy()
    const copied = Date.now()
    let restoredAt = copied
    if ('fallback' in copy) {
      this.logFile.note(`no template start (${copy.reason}): booting`)
      template.report(copy.fallback, copy.reason)
      return false
    }
    const { generation, pidFile } = await this.#beginRestore()
    const child = this.#launchRestore(copy.dir, checkpoint, pidFile)
    const restore = {
      pidFile,
      fromTemplate: true,
      personalise: (pid: number) => {
        restoredAt = Date.now()
        return template.personalise(pid)
      },
      failure: undefined as string | undefined,
    }
    const restored =
      !(child instanceof Error) && (await this.#watch(generation, child, prepared, restore))
    // CRIU may still hold the folder open for a moment.
    setTimeout(() => void rm(copy.dir, { recursive: true, force: true }), 60_000).unref()
    if (restored) {
      const secs = (from: number, to: number) => `${((to - from) / 1000).toFixed(2)} s`
      this.logFile.note(
        `template start: its copy made in ${secs(began, copied)}, restored in ${secs(copied, restoredAt)}, its own token taken in ${secs(restoredAt, Date.now())}`
      )
      template.report('restored')
      return true
    }
    const fallback: TemplateFallback = restore.failure ? 'personalise' : 'restore'
    const reason =
      restore.failure ??
      (child instanceof Error ? child.message : await lastErrors(join(copy.dir, 'restore.log')))
    this.logFile.note(`could not start from its template (${reason}): booting`)
    // CRIU's whole account, kept beside the agent's log until its next template start.
    await copyFile(
      join(copy.dir, 'restore.log'),
      join(this.paths.runtime, 'template-restore.log')
    ).catch(() => undefined)
    template.report(fallback, reason)
    return false
  }

  /** Until CRIU names the restored tree (true) or ends first (false). */
  async #restoreFinished(pidFile: string, ended: () => boolean): Promise<boolean> {
    const deadline = Date.now() + RESTORE_TIMEOUT_MS
    while (Date.now() < deadline) {
      if (ended()) return false
      if (existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim()) return true
      await sleep(20)
    }
    return false
  }

  /**
   * Spawns `launch` in its own process group, output to the agent's log,
   * behind the cgroup gate when the agent has groups; the error when it
   * could not be spawned.
   */
  #launch(
    launch: { command: string; args: string[] },
    options: { cwd: string; uid?: number; gid?: number; inheritFiles: string[] }
  ): ChildProcess | Error {
    const prepared = this.prepared!
    // A boot or wake already under way when the service began to stop leaves nothing behind.
    if (this.settings.launchesRefused?.()) return new Error('the service is shutting down')
    const cgroup = prepared.cgroup
    const fd = this.logFile.openForChild()
    const inherited: number[] = []
    try {
      for (const file of options.inheritFiles) inherited.push(openSync(file, 'r'))
      return spawn(
        cgroup ? '/bin/sh' : launch.command,
        cgroup ? [...CGROUP_GATE, launch.command, ...launch.args] : launch.args,
        {
          cwd: options.cwd,
          env: prepared.env,
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

  /**
   * Follows a spawned run: exit events, cgroups, its record, `running`.
   * For a restore (`restore` set) it first waits for CRIU to finish: false
   * (and nothing reported) when CRIU ended before it did.
   */
  async #watch(
    generation: number,
    child: ChildProcess,
    prepared: PreparedLaunch,
    restore?: {
      pidFile: string
      fromTemplate?: boolean
      /** Before the run is anyone's: an error message when the restored tree is not to be kept. */
      personalise?: (pid: number) => Promise<string | undefined>
      /** Set to personalise's error. */
      failure?: string
    }
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
      // A gate that died already must not take the service down with EPIPE.
      child.stdin?.on('error', () => undefined)
      try {
        cgroup.join(child.pid)
        child.stdin?.end('\n')
      } catch (error) {
        // Never run it outside its limits: this start fails (and is retried as a crash).
        this.logFile.note(`could not join its cgroups: ${(error as Error).message}`)
        child.kill('SIGKILL')
      }
    }
    if (restore) {
      if (!(await this.#restoreFinished(restore.pidFile, () => settled))) {
        if (!settled) signalTree(child.pid, [], 'SIGKILL')
        this.#child = undefined
        return false
      }
      if (restore.personalise && !settled) {
        const failure = await restore.personalise(Number(readFileSync(restore.pidFile, 'utf8')))
        if (failure) {
          restore.failure = failure
          signalTree(child.pid, treeUsage(child.pid).pids, 'SIGKILL')
          const deadline = Date.now() + 5000
          while (!settled && Date.now() < deadline) await sleep(20)
          this.#child = undefined
          return false
        }
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

    if (this.#stopping) {
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
    if (Date.now() - startedAt >= restart.stableAfterMs) this.#consecutiveCrashes = 0
    this.#consecutiveCrashes++
    if (this.#consecutiveCrashes > restart.maxConsecutiveRestarts) {
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

    const delayMs = Math.min(
      restart.baseDelayMs * 2 ** (this.#consecutiveCrashes - 1),
      restart.maxDelayMs
    )
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
    this.#restartTimer = setTimeout(() => {
      this.#restartTimer = undefined
      if (this.state !== 'restarting' || this.settings.launchesRefused?.()) return
      this.#spawn().catch((error) =>
        this.#onExit(this.#generation, `failed to start: ${error.message}`)
      )
    }, delayMs)
    this.#restartTimer.unref()
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
    if (limit) {
      const usedMb = treeUsage(record.pid).rssBytes / 1024 / 1024
      if (usedMb > limit) {
        this.logFile.note(`memory ${Math.round(usedMb)} MB over the ${limit} MB limit: killing it`)
        signalTree(record.pid, treeUsage(record.pid).pids, 'SIGKILL')
      }
    }
  }

  /** SIGTERM to the process group, SIGKILL to what is left after the grace period. */
  async stop(): Promise<void> {
    this.#stopping = true
    if (this.#restartTimer) clearTimeout(this.#restartTimer)
    this.#restartTimer = undefined
    const record = this.record
    if (!record || !isAlive(record.pid)) {
      this.#generation++
      this.record = undefined
      await deleteRecord(this.paths.recordFile)
      this.state = 'stopped'
      this.#stopPolling()
      await this.prepared?.cgroup?.release()
      return
    }
    const members = treeUsage(record.pid).pids.map((pid) => ({
      pid,
      startTime: readProcStat(pid)?.startTime,
    }))
    this.logFile.note(`stopping process ${record.pid}`)
    const exited = new Promise<void>((resolve) => this.#exitWaiters.push(resolve))
    signalTree(record.pid, ownGroupChildren(record.pid), 'SIGTERM')
    const deadline = Date.now() + this.settings.stopGraceMs
    const living = () =>
      members
        .filter(({ pid, startTime }) => isAlive(pid) && readProcStat(pid)?.startTime === startTime)
        .map(({ pid }) => pid)
    // The grace period is the whole tree's: a sandbox's launcher may exit on SIGTERM
    // while the framework under it still shuts down.
    while ((isAlive(record.pid) || living().length > 0) && Date.now() < deadline) await sleep(50)
    const survivors = living()
    if (survivors.length) {
      this.logFile.note(`still running after ${this.settings.stopGraceMs}ms: SIGKILL`)
      signalTree(record.pid, survivors, 'SIGKILL')
    }
    await this.#ended(record, exited, 'stopped')
    await this.#stopped('stopped')
  }

  /**
   * Until the run's launcher has exited (at most 5 s): our own child reports
   * it; an adopted process is gone once /proc says so.
   */
  async #ended(record: ProcessRecord, exited: Promise<void>, reason: string) {
    if (this.#child) {
      await Promise.race([exited, sleep(5000)])
      return
    }
    const deadline = Date.now() + 5000
    while (isAlive(record.pid) && Date.now() < deadline) await sleep(20)
    this.#onExit(this.#generation, reason)
  }

  /** What every stop ends with: no run, no record, no groups. */
  async #stopped(note: string) {
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

  /** True when a sleep can checkpoint this run (running, in a sandbox CRIU can restore). */
  canHibernate(): boolean {
    return this.state === 'running' && this.prepared?.checkpoint !== undefined && !!this.record
  }

  /** Private resident bytes of the run's processes: about what its checkpoint takes on disk. */
  privateBytes(): number {
    return this.record ? treePrivateBytes(this.record.pid) : 0
  }

  /**
   * Sleep with a checkpoint: the framework's processes are written to disk
   * (app/runtime/process/checkpoint.ts) and end, and the next start
   * restores them. False, with the agent still running, when no checkpoint
   * could be taken (the caller then stops it).
   */
  async hibernate(options: { uncompressed?: boolean } = {}): Promise<boolean> {
    const checkpoint = this.prepared?.checkpoint
    const record = this.record
    if (!checkpoint || !record || this.state !== 'running' || !isAlive(record.pid)) return false
    // The sandbox's launcher (bubblewrap, or CRIU after a restore) has one child: the framework.
    const framework = childPids(record.pid)
    if (framework.length !== 1) return false
    const members = treeUsage(record.pid).pids
    this.#stopping = true
    const exited = new Promise<void>((resolve) => this.#exitWaiters.push(resolve))
    const result = await checkpoint.store.dump({
      pid: framework[0],
      uid: checkpoint.uid,
      enter: checkpoint.enter,
      mounts: checkpoint.mounts,
      uncompressed: options.uncompressed,
      meta: {
        fingerprint: checkpoint.fingerprint,
        framework: this.prepared!.framework,
        port: record.port,
      },
    })
    if (!result.meta) {
      this.logFile.note(`no checkpoint (${result.error})`)
      return false
    }
    // The dump ended the framework; its launcher follows.
    await this.#ended(record, exited, 'checkpointed')
    // A restore needs the same pids: wait until its orphans are reaped, not just dead.
    const reaped = Date.now() + 5000
    while (members.some((pid) => readProcStat(pid)) && Date.now() < reaped) await sleep(20)
    await this.#stopped(
      `asleep: checkpointed to disk (${Math.round(result.meta.bytes / 1024 / 1024)} MB), no memory held`
    )
    return true
  }

  /** CPU over the window since the last reading (or a short fresh window) and resident memory. */
  async usage(): Promise<ContainerUsage> {
    const record = this.record
    const memoryLimitMb = this.prepared?.memoryLimitMb ?? 0
    if (!record) return { cpuPercent: 0, memoryMb: 0, memoryLimitMb }
    let first = this.#cpuSample
    const age = first ? Date.now() - first.at : 0
    if (!first || first.pid !== record.pid || age < 200 || age > 60_000) {
      const now = treeUsage(record.pid)
      first = { ticks: now.cpuTicks, at: Date.now(), pid: record.pid }
      await sleep(500)
    }
    const current = treeUsage(record.pid)
    const at = Date.now()
    this.#cpuSample = { ticks: current.cpuTicks, at, pid: record.pid }
    const seconds = (at - first.at) / 1000
    const cpuSeconds = Math.max(0, current.cpuTicks - first.ticks) / ticksPerSecond()
    return {
      cpuPercent: seconds > 0 ? Math.round((cpuSeconds / seconds) * 1000) / 10 : 0,
      memoryMb: Math.round((current.rssBytes / 1024 / 1024) * 10) / 10,
      memoryLimitMb,
    }
  }

  /** Forgets the process without stopping it (service shutdown). */
  detach() {
    if (this.#restartTimer) clearTimeout(this.#restartTimer)
    this.#stopPolling()
    this.#child?.unref()
    this.#generation++
  }
}
