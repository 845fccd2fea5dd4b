/*
|--------------------------------------------------------------------------
| `npm test`: the suites in parallel shards
|--------------------------------------------------------------------------
|
| Runs every spec file of every suite (adonisrc.ts), split into N shards
| (`--shards N` or TEST_SHARDS, default 4), each a `node ace test` of its
| own on its own files, PostgreSQL database, PORT and STORAGE_DIR; most of
| a shard's time is spent waiting on the agents, servers and containers it
| starts, so N above the number of cores still pays. The files are balanced
| by their times in tests/timings.json (`--update-timings` rewrites it from
| this run); the files that use something of the whole host (the Docker
| engine, build/) stay together in one shard (tests/parallel/plan.ts).
|
|   npm test                                  every suite
|   npm test -- unit functional               some suites
|   npm test -- --files agents/logs           files (japa's --files filter)
|   npm test -- --shards 2 --update-timings
|
| Other arguments go to each shard's `node ace test` (e.g. `--tests <title>`).
| One suite or file at a time without shards: `node ace test <suite> --files x`.
|
*/
process.env.NODE_ENV = 'test'

import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import rc from '../adonisrc.js'
import { storageDir } from '#core/bootstrap/paths'
import { freePort } from '#tests/helpers/processes'
import { mergeReports } from '#tests/helpers/red_team_report'
import { shardDatabases } from '#tests/parallel/databases'
import {
  matchesFileFilter,
  partition,
  readTimings,
  specFiles,
  type Timings,
} from '#tests/parallel/plan'
import { runShard, type ShardRun } from '#tests/parallel/shard_process'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
const TIMINGS_FILE = join(ROOT, 'tests', 'timings.json')

function parseArgs(argv: string[]) {
  const parsed = {
    shards: Number(process.env.TEST_SHARDS) || 4,
    updateTimings: false,
    suites: [] as string[],
    files: [] as string[],
    passThrough: [] as string[],
  }
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index]
    const [flag, inline] = arg.startsWith('--') ? arg.split(/=(.*)/s, 2) : [arg]
    const value = () => inline ?? argv[++index]
    if (flag === '--shards') parsed.shards = Math.max(1, Number(value()) || 1)
    else if (flag === '--update-timings') parsed.updateTimings = true
    else if (flag === '--files') parsed.files.push(...value().split(','))
    else if (!arg.startsWith('-') && parsed.passThrough.length === 0) parsed.suites.push(arg)
    else parsed.passThrough.push(arg)
  }
  return parsed
}

const minutes = (ms: number) => {
  const seconds = Math.round(ms / 1000)
  return `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`
}

function summarise(runs: ShardRun[], wallMs: number): boolean {
  let ok = true
  const rows: string[] = []
  const problems: string[] = []
  const totals = { files: 0, passed: 0, failed: 0, skipped: 0 }
  for (const run of runs) {
    const count = (key: 'passed' | 'failed' | 'skipped') =>
      run.timings.reduce((sum, timing) => sum + timing[key], 0)
    const reported = new Set(run.timings.map((timing) => timing.file))
    const missing = run.shard.files.filter((file) => !reported.has(file.file))
    const row = { passed: count('passed'), failed: count('failed'), skipped: count('skipped') }
    totals.files += reported.size
    totals.passed += row.passed
    totals.failed += row.failed
    totals.skipped += row.skipped
    const exit = run.signal ?? String(run.exitCode)
    rows.push(
      `  [${run.shard.index}] ${String(reported.size).padStart(3)} files  ${String(row.passed).padStart(4)} passed  ` +
        `${String(row.failed).padStart(3)} failed  ${String(row.skipped).padStart(3)} skipped  ` +
        `${minutes(run.ms)} (expected ${minutes(run.shard.expectedMs)}; ` +
        `${minutes(run.beforeMs)} before its first file, ${minutes(run.afterMs)} after its last)  exit ${exit}`
    )
    for (const timing of run.timings) {
      for (const failure of timing.failures)
        problems.push(`  [${run.shard.index}] ${timing.file}: ${failure}`)
    }
    for (const file of missing)
      problems.push(`  [${run.shard.index}] ${file.file}: did not run to its end`)
    if (run.exitCode !== 0 || row.failed > 0 || missing.length > 0) {
      ok = false
      if (run.exitCode !== 0 && row.failed === 0 && missing.length === 0) {
        problems.push(
          `  [${run.shard.index}] exited with ${exit} (see ${join(run.storage, 'output.log')})`
        )
      }
    }
  }
  console.log(`\n${'='.repeat(78)}\nShards:`)
  for (const row of rows) console.log(row)
  console.log(
    `Total: ${totals.files} files, ${totals.passed} passed, ${totals.failed} failed, ` +
      `${totals.skipped} skipped, in ${minutes(wallMs)}`
  )
  if (problems.length > 0) console.log(`\nFailures:\n${problems.join('\n')}`)
  console.log(ok ? '\nPASSED' : '\nFAILED')
  return ok
}

/**
 * tests/timings.json from this run: a file's new time is the mean of its old
 * one and this run's (one run on a busy machine does not swing the balance),
 * files that are gone are dropped.
 */
function writeTimings(runs: ShardRun[], previous: Timings, present: Set<string>) {
  const measured: Timings = Object.fromEntries(
    Object.entries(previous).filter(([file]) => present.has(file))
  )
  for (const run of runs) {
    for (const timing of run.timings) {
      const old = previous[timing.file]
      const ms = old === undefined ? timing.ms : (old + timing.ms) / 2
      measured[timing.file] = Math.round(ms / 100) * 100
    }
  }
  const sorted = Object.fromEntries(Object.entries(measured).sort(([a], [b]) => a.localeCompare(b)))
  writeFileSync(TIMINGS_FILE, JSON.stringify(sorted, null, 2) + '\n')
  console.log(`tests/timings.json: ${Object.keys(sorted).length} files`)
}

const args = parseArgs(process.argv.slice(2))
const suites = (rc.tests?.suites ?? []).filter(
  (suite) => args.suites.length === 0 || args.suites.includes(suite.name)
)
if (suites.length === 0) throw new Error(`no such suite: ${args.suites.join(', ')}`)
const allFiles = await specFiles(rc.tests?.suites ?? [], ROOT)
let files = await specFiles(suites, ROOT)
if (args.files.length > 0) files = files.filter((file) => matchesFileFilter(file.file, args.files))
if (files.length === 0) {
  console.error('No spec file matches.')
  process.exit(1)
}

const timings = readTimings(TIMINGS_FILE)
const shards = partition(files, timings, args.shards)
const storage = storageDir(ROOT)
console.log(
  `${files.length} files in ${shards.length} shards (balanced by tests/timings.json):\n` +
    shards
      .map(
        (shard) => `  [${shard.index}] ${shard.files.length} files, ~${minutes(shard.expectedMs)}`
      )
      .join('\n')
)

const databases = await shardDatabases({
  count: shards.length,
  storage,
  log: (m) => console.log(m),
})
const basePort = process.env.PORT ? Number(process.env.PORT) : undefined
const pids: number[] = []
let interrupted = 0
/** Grace for a shard to stop its agents and servers after Ctrl-C, before it is killed. */
const STOP_GRACE_MS = 15_000
const signalShards = (signal: NodeJS.Signals) => {
  // Each shard's process group: its japa process and the servers it started.
  for (const pid of pids) {
    try {
      process.kill(-pid, signal)
    } catch {}
  }
}
const stop = (signal: NodeJS.Signals) => {
  // japa goes on with the next test after its app stopped: the shards get a grace, then SIGKILL.
  if (++interrupted > 1) return signalShards('SIGKILL')
  signalShards(signal)
  setTimeout(() => signalShards('SIGKILL'), STOP_GRACE_MS).unref()
}
process.on('SIGINT', () => stop('SIGINT'))
process.on('SIGTERM', () => stop('SIGTERM'))

const startedAt = performance.now()
let runs: ShardRun[]
try {
  runs = await Promise.all(
    shards.map(async (shard) =>
      runShard(shard, {
        root: ROOT,
        storage,
        databaseUrl: databases.urls[shard.index - 1],
        port: basePort ? basePort + shard.index - 1 : await freePort(),
        shardCount: shards.length,
        args: args.passThrough,
        started: (pid) => pids.push(pid),
      })
    )
  )
} finally {
  await databases.release()
}

// The red team's modes ran in several shards: one table, where the README says it lands.
const redTeam = mergeReports(
  runs.map((run) => run.storage),
  storage
)
if (redTeam)
  console.log(`\nRed team (all shards; in ${join(storage, 'redteam-report.md')}):\n${redTeam}`)
const ok = summarise(runs, performance.now() - startedAt)
if (args.updateTimings) writeTimings(runs, timings, new Set(allFiles.map((file) => file.file)))
process.exitCode = ok && interrupted === 0 ? 0 : 1
