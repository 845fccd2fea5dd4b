import type { ChildProcess } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { copyFile, readdir, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { lastErrors, restoreCommand } from '#runtime/process/checkpoint'
import { treeUsage } from '#runtime/process/proc_stats'
import { signalTree } from '#runtime/process/run_process'
import type { LogFile } from '#runtime/process/log_file'
import type { PreparedLaunch } from '#runtime/process/prepared_launch'
import type { TemplateFallback } from '#runtime/process/template'
import { PARENT_LINK } from '#runtime/process/template_pages'

/**
 * An agent's start by CRIU instead of a boot: a wake from its own
 * checkpoint (app/runtime/process/checkpoint.ts), or a new agent's first
 * start from its framework's template (template.ts). Either falls back to a
 * boot, with nothing left running, when it cannot.
 */

/** How long a template copy's images stay after its restore (CRIU has ended with it by then). */
const TEMPLATE_COPY_IMAGES_KEPT_MS = 15_000

/** A template copy's images removed, its link to the template kept. */
async function keepOnlyParentLink(dir: string): Promise<void> {
  const names = await readdir(dir)
  for (const name of names) {
    if (name !== PARENT_LINK) await rm(join(dir, name), { recursive: true, force: true })
  }
}

/** Longest a restore may take before it counts as failed (a restore of 1 GB takes ~1-2 s). */
const RESTORE_TIMEOUT_MS = 30_000

/** A restore the supervisor follows (AgentProcess's watch). */
export interface WatchedRestore {
  pidFile: string
  fromTemplate?: boolean
  /** Before the run is anyone's: an error message when the restored tree is not to be kept. */
  personalise?: (pid: number) => Promise<string | undefined>
  /** Set to personalise's error. */
  failure?: string
}

/** What a restore does with the agent's supervisor (AgentProcess). */
export interface RestoreRun {
  /** Throws when the service is stopping: no run is launched any more. */
  assertLaunchesAllowed(): void
  /** A restore begins: a new generation, `starting`, no pid file of an earlier restore. */
  begin(): Promise<{ generation: number; pidFile: string }>
  /** Spawns CRIU's command like a run (the agent's log, process group, cgroup gate). */
  launch(command: { command: string; args: string[] }): ChildProcess | Error
  /** Follows the run CRIU restores: false (and nothing reported) when CRIU ended before it did. */
  watch(
    generation: number,
    child: ChildProcess,
    prepared: PreparedLaunch,
    restore: WatchedRestore
  ): Promise<boolean>
  logFile: LogFile
  /** The agent's own service folder (`<agents>/.runtime/<id>`). */
  runtimeDir: string
}

/** CRIU restoring the images in `dir` into the agent's sandbox, uid, mounts and namespace. */
function restoreLaunch(
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
  return checkpoint.enter?.(command) ?? command
}

/**
 * Wakes the agent from its checkpoint. False, with nothing left running,
 * when there is none for this launch or CRIU could not restore it (the
 * caller boots it instead).
 */
export async function restoreCheckpoint(
  prepared: PreparedLaunch | undefined,
  run: RestoreRun
): Promise<boolean> {
  const checkpoint = prepared?.checkpoint
  if (!prepared || !checkpoint) return false
  const meta = await checkpoint.store.meta()
  if (!meta) return false
  // Kept for the next wake: a stopping service restores nothing.
  run.assertLaunchesAllowed()
  if (meta.fingerprint !== checkpoint.fingerprint || meta.port !== prepared.port) {
    run.logFile.note(
      'its checkpoint is of an older launch (config, skills or port changed): booting'
    )
    await checkpoint.store.discard()
    return false
  }
  if (!(await checkpoint.store.templateIntact(meta))) {
    run.logFile.note('its checkpoint is a delta on a template rebuilt or removed since: booting')
    await checkpoint.store.discard()
    return false
  }
  const { generation, pidFile } = await run.begin()
  const unpackError = await checkpoint.store.unpack()
  if (unpackError) {
    run.logFile.note(`could not unpack its checkpoint (${unpackError}): booting`)
    await checkpoint.store.discard()
    return false
  }
  const child = run.launch(restoreLaunch(checkpoint.store.dir, checkpoint, pidFile))
  const restored =
    !(child instanceof Error) && (await run.watch(generation, child, prepared, { pidFile }))
  if (restored) {
    await checkpoint.store.consume()
    return true
  }
  const reason = child instanceof Error ? child.message : await checkpoint.store.restoreErrors()
  run.logFile.note(`could not restore its checkpoint (${reason}): booting`)
  await checkpoint.store.discard()
  return false
}

/**
 * A new agent's first start from its framework's template: CRIU restores
 * the agent's own copy of the images into its sandbox, then the framework
 * takes its own token. False, with nothing left running, when it could
 * not (the caller boots it; the driver counts why).
 */
export async function startFromTemplate(
  prepared: PreparedLaunch | undefined,
  run: RestoreRun
): Promise<boolean> {
  const template = prepared?.template
  const checkpoint = prepared?.checkpoint
  if (!prepared || !template) return false
  // Only ever the first start: a later boot (a crash restart, a wake) boots.
  prepared.template = undefined
  if (!checkpoint) return false
  run.assertLaunchesAllowed()
  const began = Date.now()
  const copy = await template.copy()
  const copied = Date.now()
  let restoredAt = copied
  if ('fallback' in copy) {
    run.logFile.note(`no template start (${copy.reason}): booting`)
    template.report(copy.fallback, copy.reason)
    return false
  }
  const { generation, pidFile } = await run.begin()
  const child = run.launch(restoreLaunch(copy.dir, checkpoint, pidFile))
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
    !(child instanceof Error) && (await run.watch(generation, child, prepared, restore))
  // Its images go once CRIU is surely done with them; after a restore its `parent` link stays,
  // so that a later sleep's checkpoint is still a delta on the template it names. A later
  // start from the template (after a sleep as new) makes its own copy at the same path: that
  // one is not this one's to clear.
  // Its inode and change time name it: a new copy may get the freed inode number back.
  const made = await stat(copy.dir, { bigint: true }).catch(() => undefined)
  const clearIfSame = async () => {
    const now = await stat(copy.dir, { bigint: true }).catch(() => undefined)
    if (!made || now?.ino !== made.ino || now.ctimeNs !== made.ctimeNs) return
    if (restored) await keepOnlyParentLink(copy.dir)
    else await rm(copy.dir, { recursive: true, force: true })
  }
  setTimeout(() => void clearIfSame().catch(() => undefined), TEMPLATE_COPY_IMAGES_KEPT_MS).unref()
  if (restored) {
    const secs = (from: number, to: number) => `${((to - from) / 1000).toFixed(2)} s`
    run.logFile.note(
      `template start: its copy made in ${secs(began, copied)}, restored in ${secs(copied, restoredAt)}, its own token taken in ${secs(restoredAt, Date.now())}`
    )
    template.report('restored')
    return true
  }
  const fallback: TemplateFallback = restore.failure ? 'personalise' : 'restore'
  const reason =
    restore.failure ??
    (child instanceof Error ? child.message : await lastErrors(join(copy.dir, 'restore.log')))
  run.logFile.note(`could not start from its template (${reason}): booting`)
  // CRIU's whole account, kept beside the agent's log until its next template start.
  await copyFile(join(copy.dir, 'restore.log'), join(run.runtimeDir, 'template-restore.log')).catch(
    () => undefined
  )
  template.report(fallback, reason)
  return false
}

/**
 * Until CRIU (`pid`) has restored the tree and, for a template start, the
 * framework took the agent's own token: true when the restored run is to be
 * kept; false when CRIU ended first or the run was refused (then killed,
 * and `restore.failure` says why). `ended`: CRIU's process has exited.
 */
export async function restoredTree(
  pid: number,
  restore: WatchedRestore,
  ended: () => boolean
): Promise<boolean> {
  if (!(await restoreFinished(restore.pidFile, ended))) {
    if (!ended()) signalTree(pid, [], 'SIGKILL')
    return false
  }
  if (restore.personalise && !ended()) {
    const failure = await restore.personalise(Number(readFileSync(restore.pidFile, 'utf8')))
    if (failure) {
      restore.failure = failure
      signalTree(pid, treeUsage(pid).pids, 'SIGKILL')
      const deadline = Date.now() + 5000
      while (!ended() && Date.now() < deadline) await sleep(20)
      return false
    }
  }
  return true
}

/** Until CRIU names the restored tree (true) or ends first (false). */
async function restoreFinished(pidFile: string, ended: () => boolean): Promise<boolean> {
  const deadline = Date.now() + RESTORE_TIMEOUT_MS
  while (Date.now() < deadline) {
    if (ended()) return false
    if (existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim()) return true
    await sleep(20)
  }
  return false
}
