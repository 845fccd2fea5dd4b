import { existsSync } from 'node:fs'
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { acquireInstallLock } from '#runtime/install_lock'
import { runInstaller } from '#runtime/installer_process'
import { TRUST_VARIABLES } from '#runtime/package_cache'

/** `name==1.2.3`: framework environments are pinned to exact versions. */
const PINNED_REQUIREMENT =
  /^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[0-9][0-9A-Za-z.+-]*$/

const SYSTEM_PYTHON = '/usr/bin/python3'

export interface PythonCacheOptions {
  /** `<storage>/runtime`: environments go to `<cacheDir>/python/<name>/`. */
  cacheDir: string
  /**
   * The interpreter that creates the environments: default the system's
   * /usr/bin/python3, which the agents' sandbox shows them (a python3 found
   * elsewhere on PATH, such as pyenv's under /root, is not), else `python3`.
   */
  python?: string
  /** Longest an install may take. */
  timeoutMs?: number
  log?: (message: string) => void
}

/** Variables pip needs (index, proxy, CA certificates); nothing of the service's secrets. */
function installEnv(): Record<string, string> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    LANG: 'C.UTF-8',
  }
  for (const [key, value] of Object.entries(process.env)) {
    if (value === undefined) continue
    if (/^PIP_/i.test(key) || /^(https?|no)_proxy$/i.test(key)) env[key] = value
    if (TRUST_VARIABLES.includes(key) || key === 'REQUESTS_CA_BUNDLE') env[key] = value
  }
  return env
}

/**
 * The runtime cache of Python frameworks (Hermes Agent): pinned
 * requirements installed once into a virtual environment under storage
 * (created with the host's `python3 -m venv`, filled with pip), shared
 * read-only by every agent of that framework, like an image pull.
 *
 * A venv cannot be moved (its scripts name its own path), so unlike the npm
 * cache it is built in place, not staged and renamed: the `.installed`
 * marker, written last and naming the requirements, is what makes it
 * usable; a folder without it is the remains of an interrupted install and
 * is removed by the next lock holder before it installs again.
 */
export class PythonPackageCache {
  readonly #inFlight = new Map<string, Promise<{ venvDir: string }>>()

  readonly #python: string

  constructor(private readonly options: PythonCacheOptions) {
    this.#python = options.python ?? (existsSync(SYSTEM_PYTHON) ? SYSTEM_PYTHON : 'python3')
  }

  #log(message: string) {
    this.options.log?.(message)
  }

  location(name: string) {
    const venvDir = join(this.options.cacheDir, 'python', name)
    return { venvDir, marker: join(venvDir, '.installed') }
  }

  async isInstalled(name: string, requirements: string[]): Promise<boolean> {
    const { marker } = this.location(name)
    if (!existsSync(marker)) return false
    try {
      const recorded = JSON.parse(await readFile(marker, 'utf8'))
      // A venv is bound to the interpreter that made it.
      return (
        recorded.python === this.#python &&
        JSON.stringify(recorded.requirements) === JSON.stringify(requirements)
      )
    } catch {
      return false
    }
  }

  /** The venv holding exactly `requirements`, installed on first use. */
  ensure(name: string, requirements: string[]): Promise<{ venvDir: string }> {
    if (!/^[a-z0-9][a-z0-9._@-]*$/i.test(name))
      throw new Error(`Invalid environment name "${name}"`)
    for (const requirement of requirements) {
      if (!PINNED_REQUIREMENT.test(requirement)) {
        throw new Error(
          `Python framework packages are pinned (name==version), got "${requirement}"`
        )
      }
    }
    let pending = this.#inFlight.get(name)
    if (!pending) {
      pending = this.#ensure(name, requirements).finally(() => this.#inFlight.delete(name))
      this.#inFlight.set(name, pending)
    }
    return pending
  }

  async #ensure(name: string, requirements: string[]): Promise<{ venvDir: string }> {
    const { venvDir } = this.location(name)
    if (await this.isInstalled(name, requirements)) return { venvDir }
    await mkdir(dirname(venvDir), { recursive: true })
    const held = await acquireInstallLock(`${venvDir}.lock`, name, {
      timeoutMs: this.options.timeoutMs,
      log: (message) => this.#log(message),
    })
    try {
      if (await this.isInstalled(name, requirements)) return { venvDir }
      if (existsSync(venvDir)) {
        this.#log(`${name}: removing an incomplete environment (an interrupted install)`)
        await rm(venvDir, { recursive: true, force: true })
      }
      await this.#install(name, requirements, venvDir)
      return { venvDir }
    } catch (error) {
      await rm(venvDir, { recursive: true, force: true })
      throw error
    } finally {
      await held.release()
    }
  }

  async #install(name: string, requirements: string[], venvDir: string) {
    const started = Date.now()
    this.#log(
      `${name}: not in the runtime cache, installing ${requirements.join(' ')} into ${venvDir}`
    )
    await this.#run(name, this.#python, ['-m', 'venv', venvDir], started)
    await this.#run(
      name,
      join(venvDir, 'bin', 'python'),
      ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-input', ...requirements],
      started
    )
    await writeFile(
      join(venvDir, '.installed'),
      `${JSON.stringify({ requirements, python: this.#python, installedAt: new Date().toISOString() })}\n`
    )
    this.#log(`${name}: installed in ${Math.round((Date.now() - started) / 1000)}s`)
  }

  async #run(name: string, command: string, args: string[], started: number) {
    let fetched = 0
    let lastError = ''
    const { code, startError } = await runInstaller({
      command,
      args,
      env: installEnv(),
      onLine: (line) => {
        if (/^\s*(Collecting|Downloading|Using cached)/.test(line)) fetched++
        if (/error/i.test(line)) lastError = `${lastError}\n${line}`.slice(-2000)
      },
      progress: () => {
        const seconds = Math.round((Date.now() - started) / 1000)
        this.#log(`${name}: installing, ${fetched} packages fetched, ${seconds}s`)
      },
      timeoutMs: this.options.timeoutMs ?? 15 * 60 * 1000,
    })
    if (code !== 0) {
      throw new Error(
        `${name}: ${[command, ...args.slice(0, 2)].join(' ')} failed (exit ${code}):${startError ?? (lastError || ' no output')}`
      )
    }
  }
}
