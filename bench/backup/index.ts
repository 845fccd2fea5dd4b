/**
 * bench/backup: an agent's backup and restore with a 100 MB workspace, and
 * its answers while it is backed up against its answers with no backup
 * running, side by side in one run against the real server (process
 * driver, fixture framework).
 *
 *   npm run bench:backup -- [--runs 5] [--workspace-mb 100] [--interval-ms 100] [--baseline-secs 4] [--json]
 *
 * The server starts from source on a throwaway PostgreSQL (bench/shared/
 * service.ts). One fixture agent runs; its workspace gets `--workspace-mb`
 * of files, half text that compresses (log lines, JSON) and half random
 * bytes that does not, in files from 4 KB to 4 MB. Chats go through the
 * service's API (POST /api/v1/agents/:id/chat, answered by the agent's
 * container) at a fixed pace, one every `--interval-ms`, at most 4 at once
 * (the service's per-agent limit), each timed from the moment it was due,
 * so a stall counts for every chat it delays. Each run has a window without
 * a backup (`--baseline-secs`) and a window that lasts one
 * POST /agents/:id/backups, in alternating order. Then one restore (with its
 * pre-restore backup of the agent as it is) is timed to its answer and to
 * the agent answering again. Needs root for the freezer (docs/backups.md
 * "Consistency"); elsewhere a backup puts the agent to sleep and the table
 * shows that.
 */
import { randomBytes } from 'node:crypto'
import { chownSync, mkdirSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { waitFor } from '../../tests/helpers/processes.ts'
import { percentile, startBenchService, type BenchService } from '../shared/service.ts'

const { values } = parseArgs({
  options: {
    'runs': { type: 'string', default: '5' },
    'workspace-mb': { type: 'string', default: '100' },
    'interval-ms': { type: 'string', default: '100' },
    'baseline-secs': { type: 'string', default: '4' },
    'json': { type: 'boolean', default: false },
  },
})
const runs = Math.max(1, Number(values.runs))
const workspaceMb = Number(values['workspace-mb'])
const intervalMs = Number(values['interval-ms'])
const baselineMs = Number(values['baseline-secs']) * 1000
const MAX_IN_FLIGHT = 4
const MB = 1024 * 1024
const fmt = (value: number | undefined) =>
  value === undefined || !Number.isFinite(value) ? '-' : value.toFixed(1)

interface Answer {
  ms: number
  /** When it was due, ms from the start of its window. */
  at: number
  /** HTTP status, or the error of a request that got none. */
  status: number | string
  /** Answered by the agent's own container (the fixture), not the hosted fallback. */
  byContainer: boolean
  ok: boolean
}

/** Text that compresses like a workspace's logs and notes (gzip: several times smaller). */
function compressibleText(bytes: number): Buffer {
  const lines: string[] = []
  let size = 0
  for (let index = 0; size < bytes; index++) {
    const line =
      index % 3 === 0
        ? `{"id":${index},"user":"user-${index % 97}","event":"page_view","path":"/docs/${index % 41}","ms":${(index * 7) % 400}}\n`
        : `2026-01-0${1 + (index % 9)}T10:${String(index % 60).padStart(2, '0')}:00Z INFO request ${randomBytes(4).toString('hex')} GET /api/items/${index % 1000} 200 ${(index * 13) % 250}ms\n`
    lines.push(line)
    size += line.length
  }
  return Buffer.from(lines.join('')).subarray(0, bytes)
}

/** The workspace's files: half compressible, half random, large and small, owned as the folder is. */
function fillWorkspace(workspace: string, totalMb: number): { files: number; bytes: number } {
  const { uid, gid } = statSync(workspace)
  const sizes = [4 * MB, 2 * MB, MB, 256 * 1024, 64 * 1024, 4096]
  let bytes = 0
  let files = 0
  const target = totalMb * MB
  for (let index = 0; bytes < target; index++) {
    const size = Math.min(sizes[index % sizes.length], target - bytes)
    const folder = join(workspace, `data-${index % 8}`)
    mkdirSync(folder, { recursive: true })
    chownSync(folder, uid, gid)
    const random = index % 2 === 1
    const path = join(folder, random ? `blob-${index}.bin` : `log-${index}.txt`)
    writeFileSync(path, random ? randomBytes(size) : compressibleText(size))
    chownSync(path, uid, gid)
    bytes += size
    files += 1
  }
  return { files, bytes }
}

/**
 * Chats at a fixed pace until `until` settles; answers each chat's time from
 * when it was due (a chat that waited for one of the 4 places counts that wait).
 */
async function chatLoad(
  service: BenchService,
  apiKey: string,
  agentId: string,
  until: Promise<unknown>
): Promise<Answer[]> {
  const answers: Answer[] = []
  const pending = new Set<Promise<void>>()
  let done = false
  void until.finally(() => (done = true))
  const start = performance.now()
  for (let index = 0; !done; index++) {
    const due = start + index * intervalMs
    const wait = due - performance.now()
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
    if (done) break
    while (pending.size >= MAX_IN_FLIGHT) await Promise.race(pending)
    const chat = service
      .request(`/api/v1/agents/${agentId}/chat`, {
        method: 'POST',
        token: apiKey,
        json: { message: `ping ${index}` },
      })
      .then(
        (answer) => {
          answers.push({
            ms: performance.now() - due,
            at: due - start,
            status: answer.status === 200 ? 200 : `${answer.status} ${answer.body?.error ?? ''}`,
            ok: answer.status === 200,
            byContainer: answer.body?.data?.model === 'fixture',
          })
        },
        (error: Error) => {
          answers.push({
            ms: performance.now() - due,
            at: due - start,
            status: error.message,
            ok: false,
            byContainer: false,
          })
        }
      )
      .finally(() => pending.delete(chat))
    pending.add(chat)
  }
  await Promise.all(pending)
  return answers
}

async function containerOf(service: BenchService, token: string, agentId: string) {
  const answer = await service.request(`/agents/${agentId}/status`, { token })
  return answer.body?.data?.container as string | undefined
}

async function untilServing(service: BenchService, token: string, agentId: string) {
  await waitFor(
    async () => ((await containerOf(service, token, agentId)) === 'running' ? true : undefined),
    { timeoutMs: 120_000, intervalMs: 50, what: 'the agent to run' }
  )
}

const service = await startBenchService('backup', {
  AGENT_IDLE_SLEEP_SECS: '3600',
  BACKUP_DAILY: 'off',
  // The service logs how long each backup kept the agent frozen (at info).
  LOG_LEVEL: 'info',
})

/** The freeze of each backup and its raw copy, from the service's log ('agent frozen for the copy'). */
function frozenMsLogged(): Array<{ frozenMs: number; copyMs: number; precopyMs: number }> {
  const number = (line: string, key: string) =>
    Number(new RegExp(`"${key}":(\\d+)`).exec(line)?.[1])
  return service
    .output()
    .split('\n')
    .filter((line) => line.includes('agent frozen for the copy'))
    .map((line) => ({
      precopyMs: number(line, 'precopyMs'),
      frozenMs: number(line, 'frozenMs'),
      copyMs: number(line, 'copyMs'),
    }))
    .filter((entry) => Number.isFinite(entry.frozenMs))
}

/** How long the packer took for each backup ('backups: archive packed'). */
function packMsLogged(): number[] {
  return service
    .output()
    .split('\n')
    .filter((line) => line.includes('backups: archive packed'))
    .map((line) => Number(/"packMs":(\d+)/.exec(line)?.[1]))
}
try {
  const token = await service.account()
  const created = await service.request('/agents', {
    method: 'POST',
    token,
    json: { name: 'Backup bench', framework: 'fixture', config: {} },
  })
  if (created.status !== 201) throw new Error(`create: ${JSON.stringify(created.body)}`)
  const agentId = created.body.data.id as string
  await untilServing(service, token, agentId)
  const key = await service.request('/auth/api-keys', {
    method: 'POST',
    token,
    json: { label: 'bench' },
  })
  if (key.status !== 201) throw new Error(`api key: ${JSON.stringify(key.body)}`)
  const apiKey = key.body.data.key as string

  const workspace = join(service.storage, 'agents', agentId, 'workspace')
  const filled = fillWorkspace(workspace, workspaceMb)
  console.error(`workspace: ${filled.files} files, ${(filled.bytes / MB).toFixed(0)} MB`)
  // Warm the paths (JIT, connections) before anything is timed.
  await chatLoad(service, apiKey, agentId, new Promise((resolve) => setTimeout(resolve, 1000)))

  const quiet: Answer[] = []
  const during: Answer[] = []
  /** Each backup's answers, for the phases the service's log marks. */
  const windows: Answer[][] = []
  const backups: Array<{ secs: number; size: number; id: string; containerAfter?: string }> = []
  for (let run = 1; run <= runs; run++) {
    const order = run % 2 === 1 ? ['quiet', 'backup'] : ['backup', 'quiet']
    for (const window of order) {
      if (window === 'quiet') {
        const pause = new Promise((resolve) => setTimeout(resolve, baselineMs))
        quiet.push(...(await chatLoad(service, apiKey, agentId, pause)))
        continue
      }
      let finished: { secs: number; size: number; id: string } | undefined
      const backup = (async () => {
        const started = performance.now()
        const made = await service.request(`/agents/${agentId}/backups`, {
          method: 'POST',
          token,
          json: {},
        })
        if (made.status !== 201) throw new Error(`backup: ${JSON.stringify(made.body)}`)
        finished = {
          secs: (performance.now() - started) / 1000,
          size: made.body.data.size,
          id: made.body.data.id,
        }
      })()
      const answers = await chatLoad(service, apiKey, agentId, backup)
      await backup
      during.push(...answers)
      windows.push(answers)
      backups.push({ ...finished!, containerAfter: await containerOf(service, token, agentId) })
      console.error(
        `run ${run}: backup ${finished!.secs.toFixed(2)} s, ${(finished!.size / MB).toFixed(1)} MB`
      )
      // A backup that put the agent to sleep wakes it in the background: wait for that.
      await untilServing(service, token, agentId)
    }
  }

  const t0 = performance.now()
  const restored = await service.request(`/agents/${agentId}/backups/${backups[0].id}/restore`, {
    method: 'POST',
    token,
  })
  if (restored.status !== 200) throw new Error(`restore: ${JSON.stringify(restored.body)}`)
  const restoreSecs = (performance.now() - t0) / 1000
  await untilServing(service, token, agentId)
  await waitFor(
    async () => {
      const answer = await service.request(`/api/v1/agents/${agentId}/chat`, {
        method: 'POST',
        token: apiKey,
        json: { message: 'back?' },
      })
      return answer.body?.data?.model === 'fixture' ? true : undefined
    },
    { timeoutMs: 60_000, intervalMs: 50, what: 'the restored agent to answer' }
  )
  const restoreToAnswerSecs = (performance.now() - t0) / 1000

  const row = (name: string, answers: Answer[]) => {
    const ms = answers.filter((answer) => answer.ok).map((answer) => answer.ms)
    const failures = answers.filter((answer) => !answer.ok).map((answer) => answer.status)
    return {
      name,
      answers: answers.length,
      failed: failures.length,
      failures: [...new Set(failures)],
      byContainer: answers.filter((answer) => answer.byContainer).length,
      p50: percentile(ms, 50),
      p99: percentile(ms, 99),
      max: Math.max(...ms),
    }
  }
  // The backup's phases, from the service's log (its window starts with the POST).
  const phases = frozenMsLogged()
  const inPhase = (
    test: (answer: Answer, phase: ReturnType<typeof frozenMsLogged>[0]) => boolean
  ) =>
    windows.flatMap((answers, index) =>
      phases[index] ? answers.filter((answer) => test(answer, phases[index])) : []
    )
  const frozenUntil = (phase: ReturnType<typeof frozenMsLogged>[0]) =>
    phase.precopyMs + phase.frozenMs + 100
  const latency = [
    row('no backup running', quiet),
    row('during a backup', during),
    row(
      '- while it copied first',
      inPhase((answer, phase) => answer.at < phase.precopyMs)
    ),
    row(
      '- due while frozen (+100 ms)',
      inPhase((answer, phase) => answer.at >= phase.precopyMs && answer.at < frozenUntil(phase))
    ),
    row(
      '- while it packed',
      inPhase((answer, phase) => answer.at >= frozenUntil(phase))
    ),
  ]
  const secs = backups.map((backup) => backup.secs)
  const sizeMb = backups.at(-1)!.size / MB
  const summary = {
    workspaceMb: filled.bytes / MB,
    files: filled.files,
    runs,
    intervalMs,
    backupSecsP50: percentile(secs, 50),
    backupSecsMax: Math.max(...secs),
    archiveMb: sizeMb,
    containerAfterBackup: [...new Set(backups.map((backup) => backup.containerAfter))],
    restoreSecs,
    restoreToAnswerSecs,
    frozenMs: frozenMsLogged(),
    packMs: packMsLogged(),
    latency,
  }
  if (values.json) {
    console.log(JSON.stringify(summary))
  } else {
    console.log(
      `\nbackup of one fixture agent, workspace ${summary.workspaceMb.toFixed(0)} MB in ${filled.files} files (half random), ${runs} runs\n`
    )
    console.log('| | figure |')
    console.log('|---|---|')
    console.log(
      `| backup (POST to 201), p50 / max | ${summary.backupSecsP50.toFixed(2)} s / ${summary.backupSecsMax.toFixed(2)} s |`
    )
    console.log(`| archive size | ${sizeMb.toFixed(1)} MB |`)
    console.log(
      `| first copy, agent running, each backup (service's log) | ${summary.frozenMs.map((entry) => `${entry.precopyMs} ms`).join(', ')} |`
    )
    console.log(
      `| agent frozen, each backup (of which the second copy) | ${summary.frozenMs.map((entry) => `${entry.frozenMs} (${entry.copyMs}) ms`).join(', ') || 'never (no freezer: put to sleep)'} |`
    )
    console.log(
      `| packing (hash, gzip) at niceness 19, each backup | ${summary.packMs.map((ms) => `${ms} ms`).join(', ')} |`
    )
    console.log(
      `| agent's container right after each backup | ${summary.containerAfterBackup.join(', ')} |`
    )
    console.log(
      `| restore (POST to 200, pre-restore backup included) | ${restoreSecs.toFixed(2)} s |`
    )
    console.log(
      `| restore to the container's first answer | ${restoreToAnswerSecs.toFixed(2)} s |\n`
    )
    console.log(
      `chats every ${intervalMs} ms, at most ${MAX_IN_FLIGHT} at once, timed from when each was due:\n`
    )
    console.log('| answers | count | by the container | failed | p50 ms | p99 ms | max ms |')
    console.log('|---|---|---|---|---|---|---|')
    for (const entry of latency) {
      console.log(
        `| ${entry.name} | ${entry.answers} | ${entry.byContainer} | ${entry.failed} | ${fmt(entry.p50)} | ${fmt(entry.p99)} | ${fmt(entry.max)} |`
      )
    }
    const failures = latency.flatMap((entry) => entry.failures)
    if (failures.length) console.log(`\nfailed chats: ${failures.join(', ')}`)
    const fallbacks = service
      .output()
      .split('\n')
      .filter((line) => line.includes('the container failed'))
    for (const line of fallbacks) console.log(`service: ${line.slice(0, 400)}`)
  }
} finally {
  await service.stop()
}
