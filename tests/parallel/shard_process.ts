/**
 * One shard of bin/test_parallel.ts: bin/test.ts (what `node ace test`
 * runs) on its own files, database, port and STORAGE_DIR, its output
 * printed line by line behind `[n] ` (and kept whole in
 * `<its storage>/output.log`).
 */
import { spawn } from 'node:child_process'
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import type { FileTiming } from '#tests/parallel/file_timings_reporter'
import type { Shard } from '#tests/parallel/plan'

export interface ShardRun {
  shard: Shard
  exitCode: number | null
  signal: NodeJS.Signals | null
  ms: number
  /** Before its first file (boot, migrations, imports) and after its last (teardown), ms. */
  beforeMs: number
  afterMs: number
  timings: FileTiming[]
  storage: string
}

export interface ShardOptions {
  root: string
  /** The checkout's storage: shards' folders go under `<storage>/tests/`. */
  storage: string
  databaseUrl: string
  port: number
  shardCount: number
  /** More arguments for `node ace test` (e.g. `--tests <title>`). */
  args: string[]
  /** Where the shard's processes are registered (to be stopped on Ctrl-C). */
  started: (pid: number) => void
}

/**
 * The shard's STORAGE_DIR, made empty; its `runtime` is the checkout's
 * (`<storage>/runtime`): OpenClaw and Hermes are installed once for all
 * shards, under the runtime cache's own install locks.
 */
function shardStorage(storage: string, index: number): string {
  const dir = join(storage, 'tests', `shard-${index}`)
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  // The cache's own folder is made with the default mode: agents run the frameworks from it.
  mkdirSync(join(storage, 'runtime'), { recursive: true })
  symlinkSync(join(storage, 'runtime'), join(dir, 'runtime'))
  return dir
}

export function runShard(shard: Shard, options: ShardOptions): Promise<ShardRun> {
  const storage = shardStorage(options.storage, shard.index)
  const filesList = join(storage, 'files.txt')
  const timingsFile = join(storage, 'timings.jsonl')
  writeFileSync(filesList, shard.files.map((file) => file.file).join('\n') + '\n')
  const log = createWriteStream(join(storage, 'output.log'))
  const prefix = `[${shard.index}] `
  const startedAt = Date.now()

  // What `node ace test` runs, without the ace process in between.
  const entry = ['--import=@poppinss/ts-exec', '--enable-source-maps', 'bin/test.ts']
  const child = spawn(process.execPath, [...entry, ...options.args], {
    cwd: options.root,
    env: {
      ...process.env,
      DATABASE_URL: options.databaseUrl,
      PORT: String(options.port),
      STORAGE_DIR: storage,
      TEST_SHARD_FILES: filesList,
      TEST_TIMINGS_OUT: timingsFile,
      TEST_SHARD: String(shard.index),
      TEST_SHARDS: String(options.shardCount),
      ...(process.stdout.isTTY && !process.env.NO_COLOR ? { FORCE_COLOR: '1' } : {}),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    // A group of its own: Ctrl-C of the runner stops the shard's whole tree (bin/test_parallel.ts).
    detached: true,
  })
  options.started(child.pid!)
  for (const stream of [child.stdout, child.stderr]) {
    stream.pipe(log, { end: false })
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
      process.stdout.write(prefix + line + '\n')
    })
  }

  return new Promise((resolve) => {
    child.once('close', (exitCode, signal) => {
      log.end()
      const timings = existsSync(timingsFile)
        ? readFileSync(timingsFile, 'utf8')
            .split('\n')
            .filter(Boolean)
            .map((line) => JSON.parse(line) as FileTiming)
        : []
      const endedAt = Date.now()
      const last = timings.at(-1)
      resolve({
        shard,
        exitCode,
        signal,
        ms: endedAt - startedAt,
        beforeMs: timings.length > 0 ? timings[0].at - startedAt : 0,
        afterMs: last ? endedAt - (last.at + last.ms) : 0,
        timings,
        storage,
      })
    })
  })
}
