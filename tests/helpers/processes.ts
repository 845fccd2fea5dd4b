import { spawn, type ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

export async function waitFor<T>(
  probe: () => Promise<T | undefined>,
  { timeoutMs = 30_000, intervalMs = 100, what = 'condition' } = {}
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const value = await probe().catch(() => undefined)
    if (value !== undefined) return value
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
  throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`)
}

export interface ServerProcess {
  child: ChildProcess
  url: string
  output: () => string
  stop: () => Promise<number | null>
}

/**
 * Node.js flags for the server child (`BENCH_SERVER_NODE_ARGS`, space-separated), such as
 * `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile a benchmark's server: Node refuses those in
 * NODE_OPTIONS.
 */
function serverNodeFlags(): string[] {
  return process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean) ?? []
}

/**
 * Starts the real server entrypoint (bin/server.ts) as a child process, with
 * the given environment on top of a copy of this one minus DATABASE_URL and
 * APP_KEY (so the child fills in its own embedded defaults) unless given.
 */
export async function startServerProcess(env: Record<string, string | undefined>) {
  // A restart keeps its PORT (as under a process manager): agents' model-proxy URLs stay valid.
  const port = env.PORT ? Number(env.PORT) : await freePort()
  const childEnv: Record<string, string> = {}
  for (const [key, value] of Object.entries({
    ...process.env,
    DATABASE_URL: undefined,
    APP_KEY: undefined,
    ...env,
  })) {
    if (value !== undefined) childEnv[key] = value
  }
  childEnv.PORT = String(port)
  childEnv.HOST = '127.0.0.1'

  let output = ''
  const child = spawn(
    process.execPath,
    [...serverNodeFlags(), '--import', '@poppinss/ts-exec', 'bin/server.ts'],
    {
      cwd: process.cwd(),
      env: childEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    }
  )
  child.stdout!.on('data', (chunk) => (output += chunk))
  child.stderr!.on('data', (chunk) => (output += chunk))

  const server: ServerProcess = {
    child,
    url: `http://127.0.0.1:${port}`,
    output: () => output,
    stop: () =>
      new Promise((resolve) => {
        // Exited already (a SIGKILL leaves exitCode null): no exit event comes any more.
        if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode)
        child.once('exit', (code) => resolve(code))
        child.kill('SIGINT')
      }),
  }
  return server
}
