/**
 * `npm start`: build the app when its sources changed since the last build,
 * then run the built server (which starts the embedded PostgreSQL when
 * DATABASE_URL is unset and applies pending migrations before it listens).
 *
 * Stopping: SIGINT, SIGTERM or SIGHUP here, or the death of the process that
 * started this one, is passed to the server once; this process exits when
 * the server has shut down (agents and the embedded database stopped).
 * npm does not pass SIGTERM on: it exits and leaves its script running
 * under init, so the parent is watched as well as the signals.
 *
 * `node scripts/start.mjs --build-only` builds (when needed) and exits.
 */
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../', import.meta.url))
const [major] = process.versions.node.split('.').map(Number)
if (major < 24) {
  console.error(`Node.js 24 or newer is required (this is ${process.version}).`)
  process.exit(1)
}

/** The build's record of the sources it was made from. */
const BUILD_STAMP = join(root, 'build', '.source-hash')
/** Folders that are not inputs of the build (outputs, state, dependencies, prose). */
const NOT_SOURCES = new Set([
  '.git',
  '.adonisjs',
  '.hypothesis',
  '.venv-fuzz',
  'build',
  'coverage',
  'docs',
  'node_modules',
  'storage',
  'tmp',
])

/**
 * SHA-256 over the path and content of every source file (a few MB: well
 * under a second). Prose (*.md) is left out, except the skills catalogue's
 * SKILL.md files, which the build copies.
 */
function sourceHash() {
  const hash = createHash('sha256')
  const visit = (relative) => {
    const entries = readdirSync(join(root, relative), { withFileTypes: true })
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    for (const entry of entries) {
      const path = relative ? `${relative}/${entry.name}` : entry.name
      if (entry.isDirectory()) {
        if (!NOT_SOURCES.has(entry.name)) visit(path)
      } else if (entry.isFile() && !(path.endsWith('.md') && !path.startsWith('skills/'))) {
        hash.update(`${path}\0`).update(readFileSync(join(root, path))).update('\0')
      }
    }
  }
  visit('')
  return hash.digest('hex')
}

/** The child this process is waiting on (the build, then the server), and how to stop it. */
let current = null
let stopping = false

function stop(signal) {
  if (stopping) return
  stopping = true
  if (!current || current.child.exitCode !== null || current.child.signalCode !== null) {
    process.exit(1)
  }
  current.stop(signal)
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => stop(signal))
// Re-parented (npm, the shell or a supervisor went away without a word): stop as for SIGTERM.
const parent = process.ppid
setInterval(() => process.ppid !== parent && stop('SIGTERM'), 500).unref()

/**
 * `node ace build`, its output passed through up to "build completed"; the
 * bundler's closing "cd build; npm ci; node bin/server.js" box is for
 * deploying the build elsewhere, not for this command, and is left out.
 */
function build() {
  return new Promise((resolve) => {
    // Its own process group, so stopping reaches tsc as well.
    const child = spawn(process.execPath, ['ace', 'build'], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
      detached: true,
    })
    current = { child, stop: (signal) => process.kill(-child.pid, signal) }
    let completed = false
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (!completed) console.log(line)
      if (line.includes('build completed')) completed = true
    })
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)))
  })
}

const hash = sourceHash()
const upToDate =
  existsSync(join(root, 'build', 'bin', 'server.js')) &&
  existsSync(BUILD_STAMP) &&
  readFileSync(BUILD_STAMP, 'utf8').trim() === hash
if (process.env.SKIP_BUILD === 'true' || upToDate) {
  console.log('[ info ] build/ is up to date with the sources')
} else {
  const status = await build()
  if (stopping) process.exit(status || 1)
  if (status !== 0) process.exit(status)
  writeFileSync(BUILD_STAMP, `${hash}\n`)
}
if (process.argv.includes('--build-only')) process.exit(0)

// Its own process group: a Ctrl-C in the terminal reaches the server once, through here.
const server = spawn(process.execPath, ['build/bin/server.js'], {
  cwd: root,
  stdio: 'inherit',
  env: { NODE_ENV: 'production', ...process.env },
  detached: true,
})
current = { child: server, stop: (signal) => server.kill(signal) }
server.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)))
