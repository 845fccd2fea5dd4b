import { existsSync, realpathSync } from 'node:fs'
import { join } from 'node:path'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import { DockerDriver, type ImageSource } from '#runtime/docker/docker_driver'
import { ProcessDriver } from '#runtime/process/process_driver'
import type { SandboxMode } from '#runtime/process/sandbox'
import { agentNetworkSettings } from '#runtime/process/agent_network/network_settings'
import { SwarmDriver } from '#runtime/swarm/swarm_driver'
import { lucidStateDatabase, swarmStateKey } from '#runtime/swarm/lucid_state'
import type { ContainerDriver } from '#runtime/types'

export interface DriverSettings {
  /** AGENT_RUNTIME: `process` (default), `docker`, `swarm` (`kubernetes` answers 503). */
  runtime?: string
  /** AGENT_IMAGES: where docker images come from (see DockerDriverOptions.images). */
  images?: ImageSource
  /** The service's storage folder (STORAGE_DIR-aware, see app/core/bootstrap/paths.ts). */
  storageDir: string
  /** The agents' folders (agentsDir in app/core/bootstrap/paths.ts); `<storage>/agents` when absent. */
  agentsDir?: string
  log?: (message: string, detail?: Record<string, unknown>) => void
  /** The log at warning level. */
  warn?: (message: string) => void
  /** APP_KEY: swarm agents' state is encrypted in the database with a key derived from it. */
  appKey?: string
}

/**
 * Where agents live (`<agentsDir>/<id>/`) and the framework cache (`<storage>/runtime/`). A
 * `runtime` that links to a cache of another storage (one install for several: the parallel
 * test shards, bench/density) is named by its real path, the one a sandbox binds and an
 * install writes into its venv's scripts: its link path is not inside an agent's sandbox.
 */
export function runtimeFolders(storageDir: string, agentsDir = join(storageDir, 'agents')) {
  const cacheDir = join(storageDir, 'runtime')
  return { agentsDir, cacheDir: existsSync(cacheDir) ? realpathSync(cacheDir) : cacheDir }
}

/** The container driver AGENT_RUNTIME names. */
export function createDriver(settings: DriverSettings): ContainerDriver {
  const { agentsDir, cacheDir } = runtimeFolders(settings.storageDir, settings.agentsDir)
  const runtime = settings.runtime || 'process'
  switch (runtime) {
    case 'process':
      return new ProcessDriver({
        agentsDir,
        cacheDir,
        compileCache: process.env.AGENT_COMPILE_CACHE !== 'off',
        checkpoints: process.env.AGENT_CHECKPOINT !== 'off',
        checkpointDiskMb: Number(process.env.AGENT_CHECKPOINT_DISK_MB) || undefined,
        // Unset: the frameworks whose plugin has templates on by default (OpenClaw; docs/runtime.md).
        templates:
          process.env.AGENT_TEMPLATES === 'on'
            ? true
            : process.env.AGENT_TEMPLATES === 'off'
              ? false
              : undefined,
        sandbox: (process.env.AGENT_SANDBOX || undefined) as SandboxMode | undefined,
        network: agentNetworkSettings() ?? null,
        log: settings.log,
        warn: settings.warn,
      })
    case 'docker':
      return new DockerDriver({ agentsDir, cacheDir, images: settings.images, log: settings.log })
    case 'swarm':
      return new SwarmDriver({
        agentsDir,
        cacheDir,
        images: settings.images,
        publishHost: process.env.SWARM_PUBLISH_HOST,
        sleep: process.env.SWARM_SLEEP === 'pause' ? 'pause' : 'stop',
        state: { db: lucidStateDatabase, key: swarmStateKey(settings.appKey ?? '') },
        log: settings.log,
      })
    case 'kubernetes':
      throw new ServiceUnavailableException(
        'AGENT_RUNTIME=kubernetes is not supported by this build; use "process", "docker" or "swarm"'
      )
    default:
      throw new ServiceUnavailableException(`Unknown AGENT_RUNTIME "${runtime}"`)
  }
}
