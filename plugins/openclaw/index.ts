import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import JSON5 from 'json5'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import {
  definePlugin,
  type AgentRuntimeContext,
  type FrameworkPlugin,
  type ProcessLaunchTools,
  type RenderedFile,
} from '#plugins/types'
import {
  agentsMarkdown,
  markdownMemory,
  modelRoute,
  soulMarkdown,
  validateAgentConfig,
} from '../_shared/agent_config.ts'
import { seedCompileCache, warmCompileCache } from './compile_cache.ts'

/**
 * OpenClaw (https://openclaw.ai), npm package `openclaw`, pinned. The
 * process driver installs it into the runtime cache on first use; the
 * docker driver runs the image of the same version. Its gateway serves the
 * OpenAI-compatible /v1/chat/completions (enabled in the rendered config),
 * authenticated with the agent's gateway token, and /readyz.
 */
/**
 * A package installed without scripts (the runtime cache uses
 * --ignore-scripts) marks itself `.openclaw-lifecycle-pending` and finishes
 * its set-up at its first run, writing into its own folder. Agents see that
 * folder read-only (their sandbox), so the service finishes it once, as
 * itself, before the first agent starts.
 */
const execFileAsync = promisify(execFile)

const lifecycleRuns = new Map<string, Promise<unknown>>()

function completePackageLifecycle(
  nodeExecutable: string,
  packageDir: string,
  log: (message: string) => void
): Promise<unknown> {
  if (!existsSync(join(packageDir, '.openclaw-lifecycle-pending'))) return Promise.resolve()
  // Agents starting together wait for one run.
  let run = lifecycleRuns.get(packageDir)
  if (!run) {
    log('finishing the openclaw package set-up (first run after install)')
    run = execFileAsync(nodeExecutable, [join(packageDir, 'openclaw.mjs'), '--version'], {
      cwd: packageDir,
      timeout: 120_000,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: packageDir },
    }).finally(() => lifecycleRuns.delete(packageDir))
    lifecycleRuns.set(packageDir, run)
  }
  return run
}

export const OPENCLAW_VERSION = '2026.9.6'
export const OPENCLAW_IMAGE = `ghcr.io/openclaw/openclaw:${OPENCLAW_VERSION}`
/** The package's engines field: ">=24.16.0 <25 || >=26.1.0". */
const MINIMUM_NODE = [24, 16]

const CONTAINER_STATE = '/home/node/.openclaw'
const CONTAINER_WORKSPACE = `${CONTAINER_STATE}/workspace`
const CONTAINER_PORT = 18789
/** The model provider id inside openclaw.json; the model ref is `agenthost/<model>`. */
const PROVIDER_ID = 'agenthost'
/** Env variable the config's `${...}` substitution reads the model key from (kept out of files). */
const MODEL_KEY_VARIABLE = 'AGENT_HOST_MODEL_KEY'

function checkNode(version: string) {
  const [major, minor] = version.replace(/^v/, '').split('.').map(Number)
  const ok = major === MINIMUM_NODE[0] ? minor >= MINIMUM_NODE[1] : major >= 26
  if (!ok) {
    throw new ServiceUnavailableException(
      `OpenClaw ${OPENCLAW_VERSION} needs Node.js 24.16 or newer (or 26.1+); the service runs on ${version}`
    )
  }
}

/** openclaw.json: a local loopback (process) or LAN (container) gateway with token auth. */
export function renderOpenClawConfig(context: AgentRuntimeContext): Record<string, unknown> {
  const route = modelRoute(context.config, context.modelProxy)
  const anthropic = route.provider === 'anthropic'
  return {
    gateway: {
      mode: 'local',
      port: context.port,
      bind: context.driver === 'process' ? 'loopback' : 'lan',
      // The token itself comes from OPENCLAW_GATEWAY_TOKEN, never from this file.
      auth: { mode: 'token' },
      http: { endpoints: { chatCompletions: { enabled: true } } },
      controlUi: { enabled: false },
    },
    update: { checkOnStart: false },
    logging: { file: join(context.paths.state, 'logs', 'openclaw.log') },
    models: {
      mode: 'merge',
      providers: {
        [PROVIDER_ID]: {
          baseUrl: anthropic ? 'https://api.anthropic.com' : route.baseUrl,
          apiKey: `\${${MODEL_KEY_VARIABLE}}`,
          api: anthropic ? 'anthropic-messages' : 'openai-completions',
          models: [
            {
              id: route.model,
              name: route.model,
              contextWindow: 128_000,
              maxTokens: 8192,
            },
          ],
        },
      },
    },
    agents: {
      defaults: {
        workspace: context.paths.workspace,
        model: { primary: `${PROVIDER_ID}/${route.model}` },
        // No recurring turns: every model call is one a user asked for.
        heartbeat: { every: '0m' },
        // SOUL.md and AGENTS.md come from the service; no first-run ritual.
        skipBootstrap: true,
      },
    },
    plugins: {
      entries: {
        // Background "dreaming" consolidation would spend model calls on its own.
        'memory-core': { config: { dreaming: { enabled: false } } },
      },
    },
  }
}

function environment(context: AgentRuntimeContext): Record<string, string> {
  return {
    OPENCLAW_STATE_DIR: context.paths.state,
    OPENCLAW_CONFIG_PATH: `${context.paths.state}/openclaw.json`,
    OPENCLAW_WORKSPACE_DIR: context.paths.workspace,
    OPENCLAW_GATEWAY_TOKEN: context.gatewayToken,
    OPENCLAW_DISABLE_BONJOUR: '1',
    OPENCLAW_NO_RESPAWN: '1',
    OPENCLAW_NO_AUTO_UPDATE: '1',
    OPENCLAW_EXEC_SHELL_SNAPSHOT: '0',
    [MODEL_KEY_VARIABLE]: modelRoute(context.config, context.modelProxy).apiKey,
  }
}

/** What the warm-up gateway of prepareHost renders from: no agent, no model route. */
const HOST_CONTEXT: AgentRuntimeContext = {
  agentId: 'host',
  config: {},
  modelProxy: { baseUrl: 'http://127.0.0.1:9/v1', token: 'warm-up', model: 'warm-up' },
  driver: 'process',
  port: 0,
  gatewayToken: 'warm-up',
  paths: { state: '', workspace: '' },
}

/**
 * The installed package (installed on first use, its set-up finished) and
 * the shared warm compile cache (made once per version; undefined when off
 * or when warming failed).
 */
async function installAndWarm(
  context: AgentRuntimeContext,
  tools: ProcessLaunchTools
): Promise<{ packageDir: string; sharedCache?: string }> {
  checkNode(process.version)
  const { packageDir } = await tools.ensureNpmPackage('openclaw', OPENCLAW_VERSION)
  await completePackageLifecycle(tools.nodeExecutable, packageDir, tools.log)
  if (!tools.compileCache) return { packageDir }
  // The warm-up gateway never chats: no model route or key of the agent's.
  const warmContext = {
    ...context,
    config: {},
    modelProxy: { baseUrl: 'http://127.0.0.1:9/v1', token: 'warm-up', model: 'warm-up' },
  }
  tools.phase?.('warming')
  const sharedCache = await warmCompileCache({
    nodeExecutable: tools.nodeExecutable,
    packageDir,
    version: OPENCLAW_VERSION,
    cacheDir: tools.compileCache.dir,
    renderConfig: (port, state, workspace) =>
      JSON5.stringify(
        renderOpenClawConfig({ ...warmContext, port, paths: { state, workspace } }),
        null,
        2
      ),
    environment: (state, workspace, token) =>
      environment({ ...warmContext, gatewayToken: token, paths: { state, workspace } }),
    log: tools.log,
  })
  return { packageDir, sharedCache }
}

export default definePlugin<FrameworkPlugin>({
  kind: 'framework',
  name: 'openclaw',
  version: '1.0.0',
  description: `OpenClaw ${OPENCLAW_VERSION} gateway`,

  validateConfig: validateAgentConfig,

  renderFiles(context): RenderedFile[] {
    return [
      {
        root: 'state',
        path: 'openclaw.json',
        content: `${JSON5.stringify(renderOpenClawConfig(context), null, 2)}\n`,
        mode: 0o600,
      },
      { root: 'workspace', path: 'SOUL.md', content: soulMarkdown(context.config) },
      {
        root: 'workspace',
        path: 'AGENTS.md',
        content: agentsMarkdown(
          context.config,
          'Keep durable facts in MEMORY.md and day notes in memory/YYYY-MM-DD.md.'
        ),
      },
      { root: 'workspace', path: 'MEMORY.md', content: '# Memory\n', onlyIfMissing: true },
    ]
  },

  async prepareHost(tools) {
    await installAndWarm(HOST_CONTEXT, tools)
  },

  async processLaunch(context, folders, tools) {
    const { packageDir, sharedCache } = await installAndWarm(context, tools)
    if (tools.compileCache && sharedCache) {
      // On the host: in the fixed layout `folders` are the paths inside the sandbox.
      const onHost = tools.hostFolders ?? folders
      if (await seedCompileCache(sharedCache, onHost, tools.compileCache.uid)) {
        tools.log('compile cache seeded from the shared warm one')
      }
    }
    return {
      command: tools.nodeExecutable,
      args: [join(packageDir, 'openclaw.mjs'), 'gateway', 'run', '--port', String(context.port)],
      env: {
        ...environment(context),
        // Per-agent caches and temp files, not the service's.
        XDG_CACHE_HOME: folders.cache,
        TMPDIR: folders.tmp,
      },
    }
  },

  containerLaunch(context) {
    return {
      image: OPENCLAW_IMAGE,
      env: environment(context),
      user: '1000:1000',
      // Without a registry: the same package from the runtime cache on this host's Node.js.
      localImage: {
        tag: `agent-host/openclaw:${OPENCLAW_VERSION}-node${process.versions.node}`,
        npmPackages: [{ name: 'openclaw', version: OPENCLAW_VERSION }],
        command: [
          '/usr/local/bin/node',
          '/opt/openclaw/node_modules/openclaw/openclaw.mjs',
          'gateway',
          'run',
          '--port',
          String(CONTAINER_PORT),
        ],
        writableDirs: [CONTAINER_STATE],
        prepare: async (packages) => {
          for (const { packageDir } of packages) {
            await completePackageLifecycle(process.execPath, packageDir, () => {})
          }
        },
      },
    }
  },

  defaultPort: CONTAINER_PORT,
  containerPaths: { state: CONTAINER_STATE, workspace: CONTAINER_WORKSPACE },
  // Measured: 0.8-1.3 GB resident per gateway.
  resources: { memoryMb: 2048, cpus: 1, pids: 512 },
  readinessPath: '/readyz',
  // Its first turn catalogues its tools and sets up its session store: ~8 s of CPU that a
  // wake from a checkpoint taken before any turn pays on the user's message (docs/runtime.md).
  warmUpBeforeCheckpoint: true,
  // Workspace skills (highest precedence); the gateway's skills watcher picks up changes.
  skillsDir: { root: 'workspace', path: 'skills', reload: 'watch' },
  // New agents start from a template checkpoint (docs/runtime.md "New agents from a template"):
  // a gateway on the hosted model proxy, booted from nothing but the model's name. Its gateway
  // and model proxy tokens (environment variables) are replaced in the restored memory; GET
  // /v1/models answers only to the token it holds. It keys its SQLite state database by the
  // file's dev:ino and checks its config files' identities: the template's are shown to it
  // again (app/runtime/process/file_identities.ts). A customer's own provider key, channel
  // settings or any other key: a cold boot.
  template: {
    shape(config) {
      const known = new Set(['personality', 'instructions', 'provider', 'model'])
      if (Object.keys(config).some((name) => !known.has(name))) return undefined
      if ((config.provider ?? 'hosted') !== 'hosted') return undefined
      return { provider: 'hosted', model: typeof config.model === 'string' ? config.model : null }
    },
    tokenCheckPath: '/v1/models',
    // Its cold boot is ~23 CPU-seconds here; a template start ~2 (docs/runtime.md).
    onByDefault: true,
  },

  chatEndpoint(context) {
    return {
      path: '/v1/chat/completions',
      headers: { authorization: `Bearer ${context.gatewayToken}` },
      model: 'openclaw/default',
    }
  },

  readMemory(files) {
    return markdownMemory(files, 'workspace', ['MEMORY.md', 'USER.md'], 'memory')
  },
})
