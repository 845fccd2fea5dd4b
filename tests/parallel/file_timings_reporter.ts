/**
 * A japa reporter that records, per spec file, its wall time and its test
 * counts, as JSON lines appended to `path` (bin/test_parallel.ts reads them:
 * the per-file times balance the shards, the counts make the summary).
 *
 * A file's time runs from its first group or test until the next file's (or
 * the suite's end), so its group hooks (setup and teardown: booting a real
 * framework, building an image) count too, not only the tests' durations.
 */
import { appendFileSync } from 'node:fs'
import { relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { NamedReporterContract } from '@japa/runner/types'

export interface FileTiming {
  file: string
  suite: string
  /** When it started (epoch ms): what a shard spent before, between and after its files. */
  at: number
  ms: number
  passed: number
  failed: number
  skipped: number
  /** Titles of the failing tests and of the groups whose hooks failed, each with its errors. */
  failures: string[]
}

/**
 * The first frame of an error's stack in a test file: which line of the test
 * failed (an error thrown deep in app code names only what, not where).
 */
function testFrame(error: unknown): string | undefined {
  if (!(error instanceof Error) || !error.stack) return undefined
  for (const line of error.stack.split('\n').slice(1)) {
    const found = line.match(/(?:file:\/\/)?(\/[^\s()]*\/(tests\/[^\s():]+):(\d+):\d+)/)
    if (found && !found[2].startsWith('tests/helpers/')) return `at ${found[2]}:${found[3]}`
  }
  return undefined
}

/**
 * A failure's title and the first lines of its errors: the summary at the end
 * of a run (all a CI log's tail may show) then says why, not only what.
 */
function describeFailure(title: string, errors: Array<{ phase: string; error: unknown }>) {
  const reasons = errors.map(({ phase, error }) => {
    const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
    const short = text.split('\n').slice(0, 4).join(' | ')
    const where = testFrame(error)
    return `${phase}: ${short.length > 1000 ? `${short.slice(0, 1000)}...` : short}${where ? ` (${where})` : ''}`
  })
  return reasons.length > 0 ? `${title}\n      ${reasons.join('\n      ')}` : title
}

export function fileTimingsReporter(path: string): NamedReporterContract {
  return {
    name: 'file-timings',
    handler(_runner, emitter) {
      let current: (FileTiming & { startedAt: number }) | undefined
      let suite = ''
      const close = () => {
        if (!current) return
        const { startedAt, ...timing } = current
        timing.ms = Math.round(performance.now() - startedAt)
        appendFileSync(path, JSON.stringify(timing) + '\n')
        current = undefined
      }
      const enter = (fileName: string | undefined) => {
        if (!fileName) return
        const file = relative(
          process.cwd(),
          fileName.startsWith('file:') ? fileURLToPath(fileName) : fileName
        )
        if (current?.file === file) return
        close()
        current = {
          file,
          suite,
          at: Date.now(),
          ms: 0,
          passed: 0,
          failed: 0,
          skipped: 0,
          failures: [],
          startedAt: performance.now(),
        }
      }
      emitter.on('suite:start', (payload) => {
        close()
        suite = payload.name
      })
      emitter.on('suite:end', close)
      emitter.on('group:start', (payload) => enter(payload.meta.fileName))
      emitter.on('test:start', (payload) => enter(payload.meta.fileName))
      emitter.on('test:end', (payload) => {
        if (!current) return
        if (payload.isSkipped || payload.isTodo) current.skipped++
        else if (payload.hasError) {
          current.failed++
          current.failures.push(describeFailure(payload.title.expanded, payload.errors))
        } else current.passed++
      })
      emitter.on('group:end', (payload) => {
        if (current && payload.hasError && payload.errors.length > 0) {
          current.failures.push(describeFailure(`${payload.title} (group hooks)`, payload.errors))
        }
      })
    },
  }
}
