/**
 * `npm start`: build the app, then run the built server (which starts the
 * embedded PostgreSQL when DATABASE_URL is unset and applies pending
 * migrations before it listens). Signals are passed on to the server so
 * Ctrl-C and SIGTERM shut it (and the embedded database) down cleanly.
 */
import { spawn, spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../', import.meta.url))
const [major] = process.versions.node.split('.').map(Number)
if (major < 24) {
  console.error(`Node.js 24 or newer is required (this is ${process.version}).`)
  process.exit(1)
}

if (process.env.SKIP_BUILD !== 'true') {
  const build = spawnSync(process.execPath, ['ace', 'build'], { cwd: root, stdio: 'inherit' })
  if (build.status !== 0) process.exit(build.status ?? 1)
}

const server = spawn(process.execPath, ['build/bin/server.js'], {
  cwd: root,
  stdio: 'inherit',
  env: { NODE_ENV: 'production', ...process.env },
})

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => server.kill(signal))
}
server.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)))
