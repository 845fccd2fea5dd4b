/**
 * The service as a newcomer runs it: built once (`scripts/start.mjs
 * --build-only`, which skips a build that is up to date), then `npm start`
 * as a child with its own STORAGE_DIR and PORT, on the embedded PostgreSQL
 * (DATABASE_URL unset), and `npm run ace -- ...` beside it.
 *
 *   const service = await npmStart()
 *   await service.ace('user:role', email, 'operator')
 *   await service.stop('SIGTERM')           // to npm's own process
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import app from '@adonisjs/core/services/app'
import { freePort, waitFor } from '#tests/helpers/processes'

/** Variables bin/test.ts sets for the test run; `npm start` runs without them. */
const TEST_RUN_VARIABLES = [
  'NODE_ENV',
  'EXTRA_PLUGIN_DIRS',
  'TRUST_PROXY',
  'SIGNUPS_PER_CLIENT_PER_DAY',
  'PASSWORD_HASH_COST',
  'DATABASE_URL',
  'APP_KEY',
  'PORT',
  'HOST',
  'STORAGE_DIR',
  'AGENTS_DIR',
  'LOG_LEVEL',
]

/** This process's environment without what the test run added. */
function projectEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const name of TEST_RUN_VARIABLES) delete env[name]
  return env
}

let built: Promise<void> | undefined

/** Builds build/ (once per test run; seconds when the sources did not change). */
export function buildOnce(): Promise<void> {
  built ??= run(process.execPath, ['scripts/start.mjs', '--build-only'], projectEnv()).then(
    ({ code, output }) => {
      if (code !== 0) throw new Error(`the build failed (${code}):\n${output}`)
    }
  )
  return built
}

/**
 * For a built server started with NODE_ENV=test: the fixture framework
 * (tests/fixtures/plugins, compiled into build/ by tsc) with the agent
 * script tsc does not copy.
 */
export function copyFixturePluginIntoBuild() {
  const from = app.makePath('tests/fixtures/plugins/fixture/server.mjs')
  copyFileSync(from, app.makePath('build/tests/fixtures/plugins/fixture/server.mjs'))
}

function run(command: string, args: string[], env: NodeJS.ProcessEnv) {
  return new Promise<{ code: number | null; output: string }>((resolve, reject) => {
    const child = spawn(command, args, { cwd: app.appRoot, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (chunk) => (output += chunk))
    child.stderr.on('data', (chunk) => (output += chunk))
    child.once('error', reject)
    child.once('exit', (code) => resolve({ code, output }))
  })
}

export interface NpmStarted {
  url: string
  storage: string
  /** npm's own process. */
  npm: ChildProcess
  output(): string
  /** `npm run ace -- <args>` with the same STORAGE_DIR (and embedded PostgreSQL). */
  ace(...args: string[]): Promise<{ code: number | null; output: string }>
  /** Sends `signal` to npm's process; resolves when npm has exited. */
  stop(signal?: NodeJS.Signals): Promise<void>
  /** Every process of this service still running: `pid command line`. */
  processes(): string[]
  /** Stops whatever is left (after a failed test) and removes the storage. */
  destroy(): Promise<void>
}

/** `npm start` on a fresh STORAGE_DIR and free PORT; resolves once /health answers 200. */
export async function npmStart(env: Record<string, string> = {}): Promise<NpmStarted> {
  await buildOnce()
  const storage = mkdtempSync(join(tmpdir(), 'npm-start-'))
  const port = await freePort()
  const childEnv = { ...projectEnv(), ...env, STORAGE_DIR: storage, PORT: String(port) }

  let output = ''
  const npm = spawn('npm', ['start'], {
    cwd: app.appRoot,
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  npm.stdout!.on('data', (chunk) => (output += chunk))
  npm.stderr!.on('data', (chunk) => (output += chunk))
  const exited = new Promise<void>((resolve) => npm.once('exit', () => resolve()))

  const url = `http://127.0.0.1:${port}`
  const started: NpmStarted = {
    url,
    storage,
    npm,
    output: () => output,
    ace: (...args) => run('npm', ['run', 'ace', '--', ...args], childEnv),
    async stop(signal = 'SIGTERM') {
      if (npm.exitCode === null && npm.signalCode === null) npm.kill(signal)
      await exited
    },
    processes: () => serviceProcesses(storage),
    async destroy() {
      await started.stop('SIGTERM')
      await waitFor(async () => (serviceProcesses(storage).length === 0 ? true : undefined), {
        timeoutMs: 30_000,
        what: 'the service to stop',
      }).catch(() => {
        for (const line of serviceProcesses(storage)) {
          try {
            process.kill(Number(line.split(' ')[0]), 'SIGKILL')
          } catch {}
        }
      })
      rmSync(storage, { recursive: true, force: true })
    },
  }
  try {
    await waitFor(
      async () => {
        if (npm.exitCode !== null) throw new Error(`npm start exited:\n${output}`)
        const answer = await fetch(`${url}/health`).catch(() => undefined)
        return answer?.status === 200 ? true : undefined
      },
      { timeoutMs: 180_000, what: 'npm start to serve /health' }
    )
  } catch (error) {
    await started.destroy()
    throw new Error(`${(error as Error).message}\n${output}`)
  }
  return started
}

/**
 * Processes of the service started on `storage`: those with the storage
 * folder in their command line (the embedded PostgreSQL's `-D`, the agents'
 * folders under `<storage>/agents`) or in their environment (start.mjs, the
 * server and what they spawn carry STORAGE_DIR).
 */
export function serviceProcesses(storage: string): string[] {
  const found: string[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'latin1').split('\0').join(' ')
      const environ = readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0')
      if (cmdline.includes(storage) || environ.includes(`STORAGE_DIR=${storage}`)) {
        found.push(`${entry} ${cmdline.trim()}`)
      }
    } catch {
      // Gone meanwhile.
    }
  }
  return found
}
