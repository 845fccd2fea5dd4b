import { join } from 'node:path'
import { stringify as toYaml } from 'yaml'
import {
  definePlugin,
  type AgentRuntimeContext,
  type FrameworkPlugin,
  type RenderedFile,
} from '#plugins/types'
import {
  agentsMarkdown,
  markdownMemory,
  modelRoute,
  soulMarkdown,
  validateAgentConfig,
} from '../_shared/agent_config.ts'

/**
 * Hermes Agent (Nous Research). Its gateway's API server serves the
 * OpenAI-compatible /v1/chat/completions and /health, authenticated with
 * API_SERVER_KEY (the agent's gateway token). State lives in HERMES_HOME:
 * config.yaml, .env, SOUL.md and memories/. The process driver runs
 * `hermes gateway run` from a venv of the runtime cache (installed from
 * PyPI on first use); the docker driver runs the official image of the
 * same release, or an image built here from that venv.
 */

/**
 * The PyPI release to install into a venv under storage/runtime/: the newest
 * whose Requires-Python (>=3.11,<3.14) accepts the host's python3 3.11.
 * Config keys below were checked against this release's code (docs/runtime.md).
 */
export const HERMES_PYPI_VERSION = '0.19.0'

/**
 * The official image of the same release: Hermes publishes versioned stable
 * images tagged `X.Y.Z`, the package version (its user guide, "Hermes Docker
 * Setup"), so the tag follows the pin and cannot drift from it.
 */
export const HERMES_IMAGE = `nousresearch/hermes-agent:${HERMES_PYPI_VERSION}`

/**
 * What the process driver installs into the runtime cache's venv: the
 * release, and aiohttp, which its API server adapter needs but which only
 * the large `messaging` extra (Telegram, Discord, Slack clients) would
 * bring (`gateway/platforms/api_server.py` imports it).
 */
export const HERMES_REQUIREMENTS = [`hermes-agent==${HERMES_PYPI_VERSION}`, 'aiohttp==3.14.1']
const HERMES_ENVIRONMENT = `hermes-agent@${HERMES_PYPI_VERSION}`

const CONTAINER_STATE = '/opt/data'
const CONTAINER_WORKSPACE = `${CONTAINER_STATE}/workspace`
const CONTAINER_PORT = 8642
const PROVIDER_NAME = 'agenthost'
const MODEL_KEY_VARIABLE = 'AGENT_HOST_MODEL_KEY'

export function renderHermesConfig(context: AgentRuntimeContext): Record<string, unknown> {
  const route = modelRoute(context.config, context.modelProxy)
  return {
    model: { default: route.model, provider: PROVIDER_NAME, base_url: route.baseUrl },
    custom_providers: [
      {
        name: PROVIDER_NAME,
        base_url: route.baseUrl,
        // The key stays in .env; config.yaml names the variable only.
        key_env: MODEL_KEY_VARIABLE,
        models: [route.model],
        context_length: 128_000,
      },
    ],
    terminal: { backend: 'local', cwd: context.paths.workspace },
    memory: { memory_enabled: true, user_profile_enabled: true },
  }
}

/** The API server settings, in .env and in the process environment alike. */
function apiServerEnv(context: AgentRuntimeContext): Record<string, string> {
  return {
    API_SERVER_ENABLED: 'true',
    API_SERVER_KEY: context.gatewayToken,
    API_SERVER_HOST: context.driver === 'process' ? '127.0.0.1' : '0.0.0.0',
    API_SERVER_PORT: String(context.port),
    [MODEL_KEY_VARIABLE]: modelRoute(context.config, context.modelProxy).apiKey,
  }
}

function dotenv(values: Record<string, string>): string {
  return Object.entries(values)
    .map(([key, value]) => `${key}=${JSON.stringify(value)}`)
    .join('\n')
    .concat('\n')
}

export default definePlugin<FrameworkPlugin>({
  kind: 'framework',
  name: 'hermes',
  version: '1.0.0',
  description: 'Hermes Agent gateway (Nous Research)',

  validateConfig: validateAgentConfig,

  renderFiles(context): RenderedFile[] {
    return [
      { root: 'state', path: 'config.yaml', content: toYaml(renderHermesConfig(context)) },
      { root: 'state', path: '.env', content: dotenv(apiServerEnv(context)), mode: 0o600 },
      { root: 'state', path: 'SOUL.md', content: soulMarkdown(context.config) },
      // Hermes' gateway reads the project context of its working directory (terminal.cwd, the
      // workspace): .hermes.md, else AGENTS.md (agent/prompt_builder.py).
      {
        root: 'workspace',
        path: 'AGENTS.md',
        content: agentsMarkdown(
          context.config,
          'Keep durable facts with your memory tool; it keeps them in memories/MEMORY.md and USER.md.'
        ),
      },
      { root: 'state', path: 'memories/MEMORY.md', content: '', onlyIfMissing: true },
      { root: 'state', path: 'memories/USER.md', content: '', onlyIfMissing: true },
    ]
  },

  async prepareHost(tools) {
    await tools.ensurePythonPackages(HERMES_ENVIRONMENT, HERMES_REQUIREMENTS)
  },

  async processLaunch(context, folders, tools) {
    const { venvDir } = await tools.ensurePythonPackages(HERMES_ENVIRONMENT, HERMES_REQUIREMENTS)
    return {
      command: join(venvDir, 'bin', 'hermes'),
      args: ['gateway', 'run'],
      env: {
        ...apiServerEnv(context),
        HERMES_HOME: folders.state,
        TERMINAL_CWD: folders.workspace,
        MESSAGING_CWD: folders.workspace,
        // The venv's own bin first (hermes, python), then the system's for its terminal tool.
        PATH: [join(venvDir, 'bin'), '/usr/local/bin', '/usr/bin', '/bin'].join(':'),
      },
    }
  },

  containerLaunch(context) {
    return {
      image: HERMES_IMAGE,
      command: ['gateway', 'run'],
      env: { ...apiServerEnv(context), HERMES_HOME: CONTAINER_STATE },
      // Without a registry: the runtime cache's venv with this host's python3.
      localImage: {
        tag: `agent-host/hermes:${HERMES_PYPI_VERSION}`,
        pythonEnvironment: { name: HERMES_ENVIRONMENT, requirements: HERMES_REQUIREMENTS },
        command: [
          `/opt/${HERMES_ENVIRONMENT}/bin/python`,
          '-m',
          'hermes_cli.main',
          'gateway',
          'run',
        ],
        writableDirs: [CONTAINER_STATE],
      },
    }
  },

  defaultPort: CONTAINER_PORT,
  containerPaths: { state: CONTAINER_STATE, workspace: CONTAINER_WORKSPACE },
  resources: { memoryMb: 2048, cpus: 1, pids: 512 },
  readinessPath: '/health',
  // HERMES_HOME/skills, the folder Hermes indexes its skills from. Hermes reads the skill index
  // when a session starts, so a change applies to new conversations without a restart.
  skillsDir: { root: 'state', path: 'skills', reload: 'watch' },

  chatEndpoint(context) {
    return {
      path: '/v1/chat/completions',
      headers: { authorization: `Bearer ${context.gatewayToken}` },
      model: 'hermes-agent',
    }
  },

  readMemory(files) {
    return markdownMemory(files, 'state', [], 'memories')
  },
})
