import { spawnSync } from 'node:child_process'
import { existsSync, realpathSync } from 'node:fs'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import app from '@adonisjs/core/services/app'
import { loadPlugins } from '#plugins/plugin_loader'
import { agentPaths } from '#runtime/agent_paths'
import { gatewayTokenFor } from '#runtime/credentials'
import { PluginRegistry } from '#plugins/plugin_registry'
import { ProcessDriver } from '#runtime/process/process_driver'
import type { ProcessDriverOptions } from '#runtime/process/process_driver_options'
import { agentUid, type SandboxMode } from '#runtime/process/sandbox'
import { RuntimeService, type RuntimeServiceOptions } from '#runtime/runtime_service'
import type { AgentRuntimeSpec, RuntimeEvent } from '#runtime/types'

/** Plugins of plugins/ plus the test-only ones of tests/fixtures/plugins. */
export async function testRegistry(): Promise<PluginRegistry> {
  return new PluginRegistry([
    ...(await loadPlugins(app.makePath('plugins'))),
    ...(await loadPlugins(app.makePath('tests/fixtures/plugins'))),
  ])
}

/**
 * The runtime cache shared by test runs (framework packages are installed once), by its real
 * path as the server names it (runtimeFolders): a parallel shard's `<storage>/runtime` links
 * to the checkout's.
 */
export function sharedCacheDir(): string {
  const dir = join(
    process.env.STORAGE_DIR ? process.env.STORAGE_DIR : app.makePath('storage'),
    'runtime'
  )
  return existsSync(dir) ? realpathSync(dir) : dir
}

export interface RuntimeHarness {
  agentsDir: string
  registry: PluginRegistry
  runtime: RuntimeService
  driver: ProcessDriver
  events: RuntimeEvent[]
  /** A second service on the same folders, as after a restart of the service. */
  restartService(): Promise<void>
  cleanup(): Promise<void>
}

/** A process-driver runtime on a private agents folder, with fast restart settings. */
export async function processHarness(
  options: Partial<ProcessDriverOptions> = {},
  runtimeOptions: Pick<RuntimeServiceOptions, 'capacity' | 'readinessTimeoutMs'> = {}
): Promise<RuntimeHarness> {
  const agentsDir = await mkdtemp(join(tmpdir(), 'agent-host-agents-'))
  const registry = await testRegistry()
  const make = () => {
    const driver = new ProcessDriver({
      agentsDir,
      cacheDir: sharedCacheDir(),
      // AGENT_SANDBOX in the test environment runs the runtime suites in that sandbox.
      sandbox: (process.env.AGENT_SANDBOX || undefined) as SandboxMode | undefined,
      stopGraceMs: 3000,
      pollIntervalMs: 200,
      restart: {
        baseDelayMs: 100,
        maxDelayMs: 400,
        maxConsecutiveRestarts: 2,
        stableAfterMs: 60_000,
      },
      ...options,
    })
    const runtime = new RuntimeService({
      driver,
      frameworks: registry,
      agentsDir,
      ...runtimeOptions,
    })
    return { driver, runtime }
  }
  const harness: RuntimeHarness = {
    agentsDir,
    registry,
    events: [],
    ...make(),
    async restartService() {
      // As after a crash of the service: its agents keep running, to be adopted.
      await harness.runtime.shutdown({ stopAgents: false })
      Object.assign(harness, make())
      harness.runtime.onEvent((event) => harness.events.push(event))
    },
    async cleanup() {
      await harness.driver.sweep([])
      await harness.runtime.shutdown()
      await rm(agentsDir, { recursive: true, force: true })
    },
  }
  harness.runtime.onEvent((event) => harness.events.push(event))
  return harness
}

export function fixtureSpec(
  agentId: string,
  config: Record<string, unknown> = {}
): AgentRuntimeSpec {
  return {
    agentId,
    framework: 'fixture',
    config: { personality: 'A test agent', ...config },
    modelProxy: {
      baseUrl: 'http://127.0.0.1:9/v1',
      token: 'proxy-token-for-tests',
      model: 'local-dev',
    },
  }
}

/**
 * The direct children of a process (Linux /proc): the program a sandbox
 * wrapper (bubblewrap) or docker-init runs, which a crash test kills.
 */
export async function childPids(pid: number): Promise<number[]> {
  const text = await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8').catch(() => '')
  return text.trim().split(/\s+/).filter(Boolean).map(Number)
}

/** Polls until `check` holds, or fails with `what` after the timeout. */
export async function waitFor<T>(
  what: string,
  check: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 10_000
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const value = await check()
    if (value) return value
    await sleep(50)
  }
  throw new Error(`Timed out after ${timeoutMs}ms waiting for ${what}`)
}

export interface ShellResult {
  code: number
  stdout: string
  stderr: string
}

/**
 * Runs a command in a fixture agent's own shell (the fixture framework's
 * `/shell`), as a framework with a shell tool would: its uid, its sandbox.
 */
export async function agentShell(
  harness: RuntimeHarness,
  agentId: string,
  cmd: string
): Promise<ShellResult> {
  return (await callFixtureOf(
    harness,
    agentId,
    `/shell?cmd=${encodeURIComponent(cmd)}`
  )) as ShellResult
}

/** POSTs to one of the fixture framework's own endpoints (`/shell`, `/log`, `/crash`). */
export async function callFixtureOf(
  harness: RuntimeHarness,
  agentId: string,
  path: string
): Promise<unknown> {
  const info = await harness.runtime.status(agentId)
  if (!info.baseUrl) throw new Error(`agent ${agentId} is not running`)
  const token = await gatewayTokenFor(agentPaths(harness.agentsDir, agentId).credentialsFile)
  const response = await fetch(`${info.baseUrl}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
  })
  return response.json()
}

/**
 * Runs `cmd` on the host as the agent's uid: the agent as it was before the
 * issue-25 layout, in a sandbox mode that showed it its own top folder (uid
 * only, a fallback sandbox), where it owned `<agents>/<id>`.
 */
export function asAgentOnHost(agentId: string, cwd: string, cmd: string): void {
  const uid = String(agentUid(agentId))
  const run = spawnSync(
    '/usr/bin/setpriv',
    [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '/bin/sh', '-c', cmd],
    { cwd, encoding: 'utf8' }
  )
  if (run.status !== 0) throw new Error(`as the agent: ${cmd}: ${run.stderr}`)
}
