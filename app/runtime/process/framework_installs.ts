import { join } from 'node:path'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import type { AgentFolders, FrameworkPlugin, ProcessLaunchTools } from '#plugins/types'
import { enterPhase } from '#runtime/boot_phases'
import { PackageCache } from '#runtime/package_cache'
import { PythonPackageCache } from '#runtime/python_cache'
import type { LogFile } from '#runtime/process/log_file'

/** A runtime-cache install whose failure the caller sees as 503 (the host, not the request). */
async function installOr503<T>(label: string, install: () => Promise<T>): Promise<T> {
  try {
    return await install()
  } catch (error) {
    throw new ServiceUnavailableException(
      `Could not install ${label} into the runtime cache: ${(error as Error).message}`,
      { cause: error }
    )
  }
}

export interface FrameworkInstallsOptions {
  /** `<storage>/runtime`: framework packages installed on first use. */
  cacheDir: string
  /** Node.js for frameworks that run on Node. */
  nodeExecutable: string
  /** Frameworks seed each agent from a warm compile cache shared by all agents. */
  compileCache: boolean
  /** The service's log. */
  log: (message: string) => void
}

/**
 * What the process driver lends a framework plugin on this host: its
 * installs in the runtime cache (npm packages, Python venvs, each under its
 * install lock) and the shared compile cache, for an agent's launch and
 * ahead of any agent (prepare).
 */
export class FrameworkInstalls {
  readonly #packages: PackageCache
  readonly #pythonPackages: PythonPackageCache

  constructor(private readonly options: FrameworkInstallsOptions) {
    this.#packages = new PackageCache({
      cacheDir: options.cacheDir,
      nodeExecutable: options.nodeExecutable,
      log: options.log,
    })
    this.#pythonPackages = new PythonPackageCache({
      cacheDir: options.cacheDir,
      log: options.log,
    })
  }

  /** The shared compile cache for processes running under `uid`, unless it is off. */
  #compileCache(uid: number): ProcessLaunchTools['compileCache'] {
    return this.options.compileCache
      ? { dir: join(this.options.cacheDir, 'compile-cache'), uid }
      : undefined
  }

  /**
   * The tools an agent's launch is prepared with: an install is the agent's
   * `installing` phase and its failure a 503; progress goes to the service's
   * log and the agent's own.
   */
  forAgent(
    agentId: string,
    options: { uid: number; logFile: LogFile; hostFolders?: AgentFolders }
  ): ProcessLaunchTools {
    return {
      nodeExecutable: this.options.nodeExecutable,
      ensureNpmPackage: (name, version) => {
        enterPhase(agentId, 'installing')
        return installOr503(`${name}@${version}`, () => this.#packages.ensure(name, version))
      },
      ensurePythonPackages: (name, requirements) => {
        enterPhase(agentId, 'installing')
        return installOr503(name, () => this.#pythonPackages.ensure(name, requirements))
      },
      phase: (step) => enterPhase(agentId, step),
      ...(options.hostFolders ? { hostFolders: options.hostFolders } : {}),
      log: (message) => {
        this.options.log(`[agent ${agentId}] ${message}`)
        options.logFile.note(message)
      },
      compileCache: this.#compileCache(options.uid),
    }
  }

  /**
   * Installs the framework and warms what its agents share, as the service
   * (the same caches and locks as an agent's start uses). A failure is
   * logged (false); agents then retry it.
   */
  async prepare(plugin: FrameworkPlugin): Promise<boolean> {
    if (!plugin.prepareHost) return true
    const started = Date.now()
    try {
      await plugin.prepareHost({
        nodeExecutable: this.options.nodeExecutable,
        ensureNpmPackage: (name, version) => this.#packages.ensure(name, version),
        ensurePythonPackages: (name, requirements) =>
          this.#pythonPackages.ensure(name, requirements),
        log: (message) => this.options.log(`[${plugin.name}] ${message}`),
        compileCache: this.#compileCache(process.getuid?.() ?? 0),
      })
      this.options.log(
        `${plugin.name} ready on this host in ${Math.round((Date.now() - started) / 1000)} s`
      )
      return true
    } catch (error) {
      this.options.log(`${plugin.name} could not be prepared: ${(error as Error).message}`)
      return false
    }
  }
}
