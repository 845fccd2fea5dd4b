import { existsSync } from 'node:fs'
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises'
import { basename, delimiter, dirname, join } from 'node:path'
import { acquireInstallLock } from '#runtime/install_lock'
import { runInstaller } from '#runtime/installer_process'

const PACKAGE_NAME = /^(@[a-z0-9][a-z0-9._-]*\/)?[a-z0-9][a-z0-9._-]*$/
const EXACT_VERSION = /^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/

export interface PackageCacheOptions {
  /** `<storage>/runtime`: installs go to `<cacheDir>/npm/<name>@<version>/`. */
  cacheDir: string
  nodeExecutable?: string
  /** Longest an install may take. */
  timeoutMs?: number
  log?: (message: string) => void
}

/** Where the host keeps its CA certificates (TLS-intercepting networks need them). */
export const TRUST_VARIABLES = ['NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'SSL_CERT_DIR']

/** Variables npm needs (registry, proxy, its own cache); nothing of the service's secrets. */
function installEnv(nodeExecutable: string): Record<string, string> {
  const env: Record<string, string> = {
    PATH: [dirname(nodeExecutable), process.env.PATH ?? '/usr/bin:/bin'].join(delimiter),
    HOME: process.env.HOME ?? '/tmp',
    LANG: 'C.UTF-8',
  }
  for (const [key, value] of Object.entries(process.env)) {
    if (value === undefined) continue
    if (/^npm_config_/i.test(key) || /^(https?|no)_proxy$/i.test(key)) env[key] = value
    if (TRUST_VARIABLES.includes(key)) env[key] = value
  }
  return env
}

function npmCli(nodeExecutable: string): { command: string; args: string[] } {
  const bundled = join(
    dirname(nodeExecutable),
    '..',
    'lib',
    'node_modules',
    'npm',
    'bin',
    'npm-cli.js'
  )
  if (existsSync(bundled)) return { command: nodeExecutable, args: [bundled] }
  return { command: 'npm', args: [] }
}

/**
 * The runtime cache of framework packages: an exact npm version is
 * installed once into its own folder under storage (not into the service's
 * node_modules), like a container image pull, with progress in the log.
 * Installs go to a temporary folder renamed into place when complete, under
 * an owner-recorded lock (see install_lock.ts), so a crash or a concurrent start never sees half an install.
 * Install scripts are not run.
 */
export class PackageCache {
  readonly #inFlight = new Map<string, Promise<{ packageDir: string }>>()
  readonly #node: string

  constructor(private readonly options: PackageCacheOptions) {
    this.#node = options.nodeExecutable ?? process.execPath
  }

  #log(message: string) {
    this.options.log?.(message)
  }

  /** Folder of `name@version` once installed. */
  location(name: string, version: string) {
    const root = join(this.options.cacheDir, 'npm', `${name.replace('/', '+')}@${version}`)
    return { root, packageDir: join(root, 'node_modules', name), marker: join(root, '.installed') }
  }

  async isInstalled(name: string, version: string): Promise<boolean> {
    const { marker, packageDir } = this.location(name, version)
    if (!existsSync(marker)) return false
    try {
      const manifest = JSON.parse(await readFile(join(packageDir, 'package.json'), 'utf8'))
      return manifest.version === version
    } catch {
      return false
    }
  }

  ensure(name: string, version: string): Promise<{ packageDir: string }> {
    if (!PACKAGE_NAME.test(name)) throw new Error(`Invalid npm package name "${name}"`)
    if (!EXACT_VERSION.test(version)) {
      throw new Error(`Framework packages are pinned to exact versions, got "${version}"`)
    }
    const key = `${name}@${version}`
    let pending = this.#inFlight.get(key)
    if (!pending) {
      pending = this.#ensure(name, version).finally(() => this.#inFlight.delete(key))
      this.#inFlight.set(key, pending)
    }
    return pending
  }

  async #ensure(name: string, version: string): Promise<{ packageDir: string }> {
    const location = this.location(name, version)
    if (await this.isInstalled(name, version)) return { packageDir: location.packageDir }

    await mkdir(dirname(location.root), { recursive: true })
    const lock = `${location.root}.lock`
    const held = await acquireInstallLock(lock, `${name}@${version}`, {
      timeoutMs: this.options.timeoutMs,
      log: (message) => this.#log(message),
    })
    try {
      // Another process may have finished the install while we waited.
      if (await this.isInstalled(name, version)) return { packageDir: location.packageDir }
      await this.#removeAbandonedStaging(location.root)
      await this.#install(name, version, location.root)
      return { packageDir: location.packageDir }
    } finally {
      await held.release()
    }
  }

  /** Staging folders of installs that died (only the lock holder installs, and that is us). */
  async #removeAbandonedStaging(root: string) {
    const prefix = `${basename(root)}.tmp-`
    for (const entry of await readdir(dirname(root))) {
      if (!entry.startsWith(prefix)) continue
      await rm(join(dirname(root), entry), { recursive: true, force: true })
      this.#log(`removed the staging folder of an interrupted install: ${entry}`)
    }
  }

  async #install(name: string, version: string, root: string) {
    const label = `${name}@${version}`
    const staging = `${root}.tmp-${process.pid}-${Date.now()}`
    await rm(staging, { recursive: true, force: true })
    await mkdir(staging, { recursive: true })
    await writeFile(
      join(staging, 'package.json'),
      JSON.stringify({ name: 'agent-host-runtime-cache', private: true }, null, 2)
    )

    const started = Date.now()
    this.#log(`${label}: not in the runtime cache, installing from the npm registry into ${root}`)
    const npm = npmCli(this.#node)
    const args = [
      ...npm.args,
      'install',
      `${name}@${version}`,
      '--omit=dev',
      '--ignore-scripts',
      '--no-audit',
      '--no-fund',
      '--no-package-lock',
      '--progress=false',
      '--loglevel=http',
    ]
    let fetched = 0
    let lastError = ''
    const { code, startError } = await runInstaller({
      command: npm.command,
      args,
      cwd: staging,
      env: installEnv(this.#node),
      onLine: (line) => {
        if (/npm http fetch/.test(line)) fetched++
        if (/npm (error|ERR!)/.test(line)) lastError = `${lastError}\n${line}`.slice(-2000)
      },
      progress: () => {
        const seconds = Math.round((Date.now() - started) / 1000)
        this.#log(`${label}: installing, ${fetched} registry fetches, ${seconds}s`)
      },
      timeoutMs: this.options.timeoutMs ?? 15 * 60 * 1000,
    })
    if (startError) lastError = startError

    if (code !== 0) {
      await rm(staging, { recursive: true, force: true })
      throw new Error(`${label}: npm install failed (exit ${code}):${lastError || ' no output'}`)
    }
    const manifest = JSON.parse(
      await readFile(join(staging, 'node_modules', name, 'package.json'), 'utf8')
    )
    if (manifest.version !== version) {
      await rm(staging, { recursive: true, force: true })
      throw new Error(`${label}: npm installed version ${manifest.version} instead`)
    }
    await writeFile(join(staging, '.installed'), `${new Date().toISOString()}\n`)
    await rm(root, { recursive: true, force: true })
    await rename(staging, root)
    this.#log(
      `${label}: installed in ${Math.round((Date.now() - started) / 1000)}s (${fetched} registry fetches)`
    )
  }
}
