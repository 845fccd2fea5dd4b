import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'

export interface InstallerRun {
  command: string
  args: string[]
  env: Record<string, string>
  cwd?: string
  /** Every line the installer prints (stdout and stderr). */
  onLine(line: string): void
  /** Called every 5 s while it runs: progress for the log. */
  progress(): void
  /** Killed after this long. */
  timeoutMs: number
}

/**
 * Runs a package installer (npm, python -m venv, pip) for the runtime
 * caches: output read line by line, progress every 5 s, killed at its
 * timeout. Answers its exit code, or -1 and why when it could not start.
 */
const SETPRIV = '/usr/bin/setpriv'

export async function runInstaller(
  run: InstallerRun
): Promise<{ code: number | null; startError?: string }> {
  // An installer must not outlive a service killed with -9: it would keep
  // writing into a staging folder that the next lock holder has cleared.
  // util-linux's setpriv asks the kernel to kill it when its parent dies.
  const [command, args] = existsSync(SETPRIV)
    ? [SETPRIV, ['--pdeathsig', 'KILL', '--', run.command, ...run.args]]
    : [run.command, run.args]
  const child = spawn(command, args, {
    cwd: run.cwd,
    env: run.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const onOutput = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) run.onLine(line)
  }
  child.stdout.on('data', onOutput)
  child.stderr.on('data', onOutput)
  const progress = setInterval(() => run.progress(), 5000)
  const timeout = setTimeout(() => child.kill('SIGKILL'), run.timeoutMs)
  try {
    return await new Promise((resolve) => {
      child.once('error', (error) => resolve({ code: -1, startError: error.message }))
      child.once('close', (code) => resolve({ code }))
    })
  } finally {
    clearInterval(progress)
    clearTimeout(timeout)
  }
}
