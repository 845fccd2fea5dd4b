import { existsSync } from 'node:fs'
import {
  lstat,
  mkdir,
  readdir,
  readFile,
  readlink,
  realpath,
  rename,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'
import { stagingName } from '#core/files/atomic_file'
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
 * Staged, then published atomically. A venv cannot be moved (its scripts
 * name its own path), so it is built at its final path, a build folder
 * `<name>.build-<stamp>/`, and `<name>` is a symlink to it, replaced with
 * rename(2) once the build is complete (its `.installed` marker, naming the
 * requirements and interpreter, written last). Until then nothing names the
 * build: an interrupted install leaves an unlinked folder that is never
 * used and is removed by the next install. Callers get the build's real
 * path, so a running agent keeps its build when a later install replaces
 * the link.
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

  /** `link`: the published name (a symlink to the current build); `marker` through it. */
  location(name: string) {
    const link = join(this.options.cacheDir, 'python', name)
    return { link, marker: join(link, '.installed') }
  }

  async isInstalled(name: string, requirements: string[]): Promise<boolean> {
    return (await this.#installed(name, requirements)) !== undefined
  }

  /** The real folder of the published venv, when it holds exactly `requirements`. */
  async #installed(name: string, requirements: string[]): Promise<string | undefined> {
    const { link, marker } = this.location(name)
    if (!existsSync(marker)) return
    try {
      const recorded = JSON.parse(await readFile(marker, 'utf8'))
      // A venv is bound to the interpreter that made it.
      const matches =
        recorded.python === this.#python &&
        JSON.stringify(recorded.requirements) === JSON.stringify(requirements)
      return matches ? await realpath(link) : undefined
    } catch {
      return
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
    const { link } = this.location(name)
    const ready = await this.#installed(name, requirements)
    if (ready) return { venvDir: ready }
    await mkdir(dirname(link), { recursive: true })
    const held = await acquireInstallLock(`${link}.lock`, name, {
      timeoutMs: this.options.timeoutMs,
      log: (message) => this.#log(message),
    })
    try {
      const installed = await this.#installed(name, requirements)
      if (installed) return { venvDir: installed }
      await this.#removeUnlinkedBuilds(name)
      const build = `${link}.build-${Date.now().toString(36)}-${process.pid}`
      try {
        await this.#install(name, requirements, build)
      } catch (error) {
        await rm(build, { recursive: true, force: true })
        throw error
      }
      await this.#publish(link, build)
      return { venvDir: build }
    } finally {
      await held.release()
    }
  }

  /**
   * Builds the link does not name: interrupted installs, and builds an
   * earlier install replaced (the current build, which running agents may
   * use, is kept until an install replaces it and another follows).
   * Only the lock holder installs, and that is us.
   */
  async #removeUnlinkedBuilds(name: string) {
    const { link } = this.location(name)
    const current = await readlink(link).catch(() => undefined)
    for (const entry of await readdir(dirname(link))) {
      const build = entry.startsWith(`${name}.build-`)
      if ((!build && !entry.startsWith(`${name}.link`)) || entry === current) continue
      await rm(join(dirname(link), entry), { recursive: true, force: true })
      this.#log(`${name}: removed ${entry}, a build no longer in use or never finished`)
    }
  }

  /** Points `link` at `build` in one rename (a reader sees the old build or the new one). */
  async #publish(link: string, build: string) {
    // `<name>.link...`: a name of its own (removeUnlinkedBuilds knows the prefix).
    const staged = stagingName(`${link}.link`)
    await symlink(basename(build), staged)
    const existing = await lstat(link).catch(() => undefined)
    if (existing && !existing.isSymbolicLink()) {
      // A venv built in place by an earlier release of this cache: rename cannot replace a folder.
      this.#log(`${basename(link)}: replacing an environment of the earlier in-place layout`)
      await rm(link, { recursive: true, force: true })
    }
    await rename(staged, link)
  }

  async #install(name: string, requirements: string[], venvDir: string) {
    const started = Date.now()
    this.#log(
      `${name}: not in the runtime cache, installing ${requirements.join(' ')} into ${venvDir}`
    )
    // Made at its final path: a venv's scripts name the folder they were made in.
    await this.#run(name, this.#python, ['-m', 'venv', venvDir], started)
    await this.#run(
      name,
      join(venvDir, 'bin', 'python'),
      ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-input', ...requirements],
      started
    )
    // Last: a build without it is never published.
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
