import { writeFile } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'
import type { ContainerInfo } from '#runtime/types'
import {
  childPids,
  isAlive,
  readProcStat,
  treePrivateBytes,
  treeUsage,
} from '#runtime/process/proc_stats'
import { restoreCheckpoint, startFromTemplate, type RestoreRun } from '#runtime/process/restores'
import {
  livingMembers,
  ownGroupChildren,
  signalTree,
  treeMembers,
} from '#runtime/process/run_process'
import { ProcessSupervisor } from '#runtime/process/process_supervisor'
import type { ProcessRecord } from '#runtime/process/process_record'

/**
 * One agent's supervised framework process: spawns it in its own process
 * group with output going straight to its log file, watches it (exit events
 * for our own children, /proc polling for adopted ones), restarts it after
 * a crash with exponential backoff, gives up after repeated crashes, and
 * stops it with SIGTERM then SIGKILL. A start may instead restore a
 * checkpoint or a template (restores.ts), and a sleep checkpoints it. The
 * supervision of each run is ProcessSupervisor's (process_supervisor.ts);
 * the process tree's signals and spawning are in run_process.ts.
 */
export class AgentProcess extends ProcessSupervisor {
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

  /** An explicit start: a fresh count of crashes and restarts. */
  async start(): Promise<void> {
    if (this.isLive()) return
    this.neverStarted = false
    this.restartCount = 0
    this.restarts.reset()
    this.lastError = null
    this.stopping = false
    if (await restoreCheckpoint(this.prepared, this.#restoreRun())) return
    if (await startFromTemplate(this.prepared, this.#restoreRun())) return
    await this.spawn()
  }

  /** What a restore (restores.ts) does with this supervisor. */
  #restoreRun(): RestoreRun {
    return {
      assertLaunchesAllowed: () => this.assertLaunchesAllowed(),
      begin: () => this.beginRestore(),
      launch: (command) => this.launch(command, { cwd: this.paths.runtime, inheritFiles: [] }),
      watch: (generation, child, prepared, restore) =>
        this.watch(generation, child, prepared, restore),
      logFile: this.logFile,
      runtimeDir: this.paths.runtime,
    }
  }

  /** SIGTERM to the process group, SIGKILL to what is left after the grace period. */
  async stop(): Promise<void> {
    this.stopping = true
    this.restarts.cancel()
    const record = this.record
    if (!record || !isAlive(record.pid)) return this.stoppedWithoutRun()
    this.logFile.note(`stopping process ${record.pid}`)
    await this.#end(record, 'SIGTERM')
    await this.stopped('stopped')
  }

  /**
   * A sleep of a run that is still its template: started from it, and sent no turn since
   * (the caller's books). Nothing of it is worth a checkpoint, so it is killed at once, and
   * its next start is from the template again, as a new agent's (`startsAsNewFile`). False,
   * still running, when this run did not start from its template.
   */
  async sleepAsNew(): Promise<boolean> {
    const record = this.record
    if (!this.startedFromTemplate || this.state !== 'running' || !record) return false
    if (!isAlive(record.pid)) return false
    await writeFile(this.paths.startsAsNewFile, '')
    this.stopping = true
    this.restarts.cancel()
    await this.#end(record, 'SIGKILL')
    await this.stopped('asleep: still as its template started it (no turn since), no checkpoint')
    return true
  }

  /** `signal` to the run's tree, SIGKILL to what is left after the grace period; until it ended. */
  async #end(record: ProcessRecord, signal: 'SIGTERM' | 'SIGKILL') {
    const members = treeMembers(record.pid)
    const exited = this.untilExited()
    signalTree(record.pid, ownGroupChildren(record.pid), signal)
    const deadline = Date.now() + this.settings.stopGraceMs
    const living = () => livingMembers(members)
    // The grace period is the whole tree's: a sandbox's launcher may exit on SIGTERM
    // while the framework under it still shuts down.
    while ((isAlive(record.pid) || living().length > 0) && Date.now() < deadline) await sleep(50)
    const survivors = living()
    if (survivors.length) {
      this.logFile.note(`still running after ${this.settings.stopGraceMs}ms: SIGKILL`)
      signalTree(record.pid, survivors, 'SIGKILL')
    }
    await this.ended(record, exited, 'stopped')
  }

  /**
   * Runs `work` with the run's processes frozen (cgroup freezer,
   * cgroups.ts) and thaws them after, whatever happens: a backup copies the
   * agent's folders meanwhile. Undefined, `work` not run, when the run is
   * not running or cannot be frozen here (`refused` hears why a freeze
   * failed). The caller holds the agent's lock.
   */
  async whileFrozen<T>(
    work: () => Promise<T>,
    refused: (reason: string) => void
  ): Promise<{ value: T } | undefined> {
    const cgroup = this.prepared?.cgroup
    if (this.state !== 'running' || !this.record || !cgroup?.canFreeze) return undefined
    const frozen = await cgroup.freeze()
    if (frozen !== true) {
      refused(frozen)
      return undefined
    }
    try {
      return { value: await work() }
    } finally {
      await cgroup.thaw()
    }
  }

  /** True when a sleep can checkpoint this run (running, in a sandbox CRIU can restore). */
  canHibernate(): boolean {
    return this.state === 'running' && this.prepared?.checkpoint !== undefined && !!this.record
  }

  /** CPU ticks the run's processes have used (undefined without a run). */
  cpuTicks(): number | undefined {
    return this.record ? treeUsage(this.record.pid).cpuTicks : undefined
  }

  /** Private resident bytes of the run's processes: about what its checkpoint takes on disk. */
  privateBytes(): number {
    return this.record ? treePrivateBytes(this.record.pid) : 0
  }

  /**
   * Sleep with a checkpoint: the framework's processes are written to disk
   * (app/runtime/process/checkpoint.ts) and end, and the next start
   * restores them. `ended` hears when they have ended (their memory is
   * free); the dump is stored as the checkpoint after that, through `store`
   * (the host's stores, one at a time). False, with the agent still
   * running, when no checkpoint could be taken (the caller then stops it).
   */
  async hibernate(options: HibernateRun = {}): Promise<boolean> {
    const checkpoint = this.prepared?.checkpoint
    const record = this.record
    if (!checkpoint || !record || this.state !== 'running' || !isAlive(record.pid)) return false
    // The sandbox's launcher (bubblewrap, or CRIU after a restore) has one child: the framework.
    const framework = childPids(record.pid)
    if (framework.length !== 1) return false
    const members = treeUsage(record.pid).pids
    this.stopping = true
    const exited = this.untilExited()
    const { dumped, error } = await checkpoint.store.dump({
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
    if (!dumped) {
      this.logFile.note(`no checkpoint (${error})`)
      return false
    }
    // The dump ended the framework; its launcher follows.
    await this.ended(record, exited, 'checkpointed')
    // A restore needs the same pids: wait until its orphans are reaped, not just dead.
    const reaped = Date.now() + 5000
    while (members.some((pid) => readProcStat(pid)) && Date.now() < reaped) await sleep(20)
    await this.stopped('asleep: dumped, no memory held; storing its checkpoint')
    await options.ended?.()
    const { meta, took } = await (options.store ?? ((work) => work()))(() => dumped.store())
    this.logFile.note(
      `asleep: checkpointed to disk (${Math.round(meta.bytes / 1024 / 1024)} MB; ${took})`
    )
    return true
  }
}

/** What a sleep's caller adds to AgentProcess.hibernate. */
export interface HibernateRun {
  /** Leave the memory images uncompressed (a template is restored many times). */
  uncompressed?: boolean
  /** Its processes have ended: their memory is free, the checkpoint not yet stored. */
  ended?: () => Promise<void>
  /** Runs the dump's store in its turn (CheckpointStores.store); at once without. */
  store?: <T>(work: () => Promise<T>) => Promise<T>
}
