import { test } from '@japa/runner'
import JSON5 from 'json5'
import { parse as parseYaml } from 'yaml'
import { ValidationException } from '#core/exceptions/api_exceptions'
import type { AgentFileReader, AgentRuntimeContext, ProcessLaunchTools } from '#plugins/types'
import openclaw, { OPENCLAW_VERSION } from '../../../plugins/openclaw/index.ts'
import hermes, { HERMES_PYPI_VERSION } from '../../../plugins/hermes/index.ts'

const folders = {
  root: '/srv/agents/a1',
  state: '/srv/agents/a1/state',
  workspace: '/srv/agents/a1/workspace',
  home: '/srv/agents/a1/home',
  tmp: '/srv/agents/a1/tmp',
  cache: '/srv/agents/a1/cache',
}

function processContext(config: Record<string, unknown> = {}): AgentRuntimeContext {
  return {
    agentId: 'a1',
    config: { personality: 'You love kites.', ...config },
    modelProxy: {
      baseUrl: 'http://127.0.0.1:3333/v1/',
      token: 'proxy-token-123456',
      model: 'local-dev',
    },
    driver: 'process',
    port: 41234,
    gatewayToken: 'f'.repeat(48),
    paths: { state: folders.state, workspace: folders.workspace },
  }
}

const pythonInstalls: Array<{ name: string; requirements: string[] }> = []

const tools: ProcessLaunchTools = {
  nodeExecutable: '/opt/node/bin/node',
  ensureNpmPackage: async (name, version) => ({
    packageDir: `/cache/npm/${name}@${version}/node_modules/${name}`,
  }),
  ensurePythonPackages: async (name, requirements) => {
    pythonInstalls.push({ name, requirements })
    return { venvDir: `/cache/python/${name}` }
  },
  log: () => {},
}

function fakeReader(files: Record<string, string>): AgentFileReader {
  return {
    async readText(root, path) {
      return files[`${root}:${path}`]
    },
    async list(root, path) {
      const prefix = `${root}:${path}/`
      return Object.keys(files)
        .filter((key) => key.startsWith(prefix) && !key.slice(prefix.length).includes('/'))
        .map((key) => ({ name: key.slice(prefix.length), type: 'file' as const }))
    },
  }
}

test.group('Framework plugins / openclaw', () => {
  test('renders openclaw.json, SOUL.md and AGENTS.md with no secret in any file', async ({
    assert,
  }) => {
    const files = await openclaw.renderFiles(processContext())
    const byPath = Object.fromEntries(files.map((file) => [`${file.root}:${file.path}`, file]))
    assert.includeMembers(Object.keys(byPath), [
      'state:openclaw.json',
      'workspace:SOUL.md',
      'workspace:AGENTS.md',
      'workspace:MEMORY.md',
    ])
    assert.equal(byPath['state:openclaw.json'].mode, 0o600)
    assert.isTrue(byPath['workspace:MEMORY.md'].onlyIfMissing)
    assert.include(byPath['workspace:SOUL.md'].content, 'You love kites.')

    const config = JSON5.parse(byPath['state:openclaw.json'].content)
    assert.deepEqual(config.gateway, {
      mode: 'local',
      port: 41234,
      bind: 'loopback',
      auth: { mode: 'token' },
      http: { endpoints: { chatCompletions: { enabled: true } } },
      controlUi: { enabled: false },
    })
    assert.deepEqual(config.update, { checkOnStart: false })
    assert.equal(config.agents.defaults.heartbeat.every, '0m')
    assert.equal(config.agents.defaults.workspace, folders.workspace)
    assert.equal(config.agents.defaults.model.primary, 'agenthost/local-dev')
    const provider = config.models.providers.agenthost
    assert.equal(provider.baseUrl, 'http://127.0.0.1:3333/v1')
    assert.equal(provider.api, 'openai-completions')
    assert.equal(provider.apiKey, '${AGENT_HOST_MODEL_KEY}')
    assert.equal(config.logging.file, `${folders.state}/logs/openclaw.log`)

    for (const file of files) {
      assert.notInclude(file.content, 'proxy-token-123456')
      assert.notInclude(file.content, 'f'.repeat(48))
    }
  })

  test('binds to the LAN inside a container', async ({ assert }) => {
    const files = await openclaw.renderFiles({ ...processContext(), driver: 'docker', port: 18789 })
    const config = JSON5.parse(files.find((file) => file.path === 'openclaw.json')!.content)
    assert.equal(config.gateway.bind, 'lan')
    assert.equal(config.gateway.port, 18789)
  })

  test("points at the customer's own provider with their key", async ({ assert }) => {
    const openai = processContext({
      provider: 'openai',
      apiKey: 'sk-customer-key',
      model: 'gpt-4.1-mini',
    })
    const files = await openclaw.renderFiles(openai)
    const config = JSON5.parse(files.find((file) => file.path === 'openclaw.json')!.content)
    assert.equal(config.models.providers.agenthost.baseUrl, 'https://api.openai.com/v1')
    assert.equal(config.agents.defaults.model.primary, 'agenthost/gpt-4.1-mini')
    const launch = await openclaw.processLaunch(openai, folders, tools)
    assert.equal(launch.env.AGENT_HOST_MODEL_KEY, 'sk-customer-key')

    const anthropic = processContext({ provider: 'anthropic', apiKey: 'sk-ant-customer' })
    const anthropicFiles = await openclaw.renderFiles(anthropic)
    const anthropicConfig = JSON5.parse(
      anthropicFiles.find((file) => file.path === 'openclaw.json')!.content
    )
    assert.equal(anthropicConfig.models.providers.agenthost.api, 'anthropic-messages')
    assert.equal(anthropicConfig.models.providers.agenthost.baseUrl, 'https://api.anthropic.com')
  })

  test('launches the pinned package from the runtime cache with its own environment', async ({
    assert,
  }) => {
    const requested: string[] = []
    const launch = await openclaw.processLaunch(processContext(), folders, {
      ...tools,
      ensureNpmPackage: async (name, version) => {
        requested.push(`${name}@${version}`)
        return tools.ensureNpmPackage(name, version)
      },
    })
    assert.deepEqual(requested, [`openclaw@${OPENCLAW_VERSION}`])
    assert.match(OPENCLAW_VERSION, /^2026\.9\.\d+$/)
    assert.equal(launch.command, '/opt/node/bin/node')
    assert.deepEqual(launch.args, [
      `/cache/npm/openclaw@${OPENCLAW_VERSION}/node_modules/openclaw/openclaw.mjs`,
      'gateway',
      'run',
      '--port',
      '41234',
    ])
    assert.include(launch.env, {
      OPENCLAW_STATE_DIR: folders.state,
      OPENCLAW_CONFIG_PATH: `${folders.state}/openclaw.json`,
      OPENCLAW_GATEWAY_TOKEN: 'f'.repeat(48),
      OPENCLAW_DISABLE_BONJOUR: '1',
      OPENCLAW_NO_RESPAWN: '1',
      XDG_CACHE_HOME: folders.cache,
      TMPDIR: folders.tmp,
      AGENT_HOST_MODEL_KEY: 'proxy-token-123456',
    })
  })

  test('chats as openclaw/default with the gateway token; reads markdown memory', async ({
    assert,
  }) => {
    assert.deepEqual(openclaw.chatEndpoint({ agentId: 'a1', gatewayToken: 'tok' }), {
      path: '/v1/chat/completions',
      headers: { authorization: 'Bearer tok' },
      model: 'openclaw/default',
    })
    assert.equal(openclaw.readinessPath, '/readyz')
    const memory = await openclaw.readMemory(
      fakeReader({
        'workspace:MEMORY.md': '# Memory\n- likes tea',
        'workspace:memory/2026-01-02.md': 'met Bob',
        'workspace:memory/image.png': 'binary',
      })
    )
    assert.deepEqual(memory, {
      'MEMORY.md': '# Memory\n- likes tea',
      'memory/2026-01-02.md': 'met Bob',
    })
  })

  test('validates the shared config keys', ({ assert }) => {
    for (const bad of [
      { personality: 42 },
      { provider: 'acme' },
      { provider: 'openai' },
      { model: '' },
      { apiKey: ['x'] },
    ]) {
      assert.throws(() => openclaw.validateConfig(bad), ValidationException as any)
    }
    const good = {
      personality: 'Hi',
      provider: 'openrouter',
      apiKey: 'or-key',
      telegramBotToken: 'x',
    }
    assert.deepEqual(openclaw.validateConfig(good), good)
  })
})

test.group('Framework plugins / hermes', () => {
  test('renders config.yaml, .env, SOUL.md, the memories folder and AGENTS.md with the instructions', async ({
    assert,
  }) => {
    const files = await hermes.renderFiles(
      processContext({ instructions: 'Answer in haiku only.' })
    )
    const byPath = Object.fromEntries(files.map((file) => [`${file.root}:${file.path}`, file]))
    assert.sameMembers(Object.keys(byPath), [
      'state:config.yaml',
      'state:.env',
      'state:SOUL.md',
      'state:memories/MEMORY.md',
      'state:memories/USER.md',
      // In the working directory (terminal.cwd), where Hermes reads project context.
      'workspace:AGENTS.md',
    ])
    assert.isTrue(byPath['state:memories/MEMORY.md'].onlyIfMissing)
    assert.include(byPath['state:SOUL.md'].content, 'You love kites.')
    assert.include(byPath['workspace:AGENTS.md'].content, 'Answer in haiku only.')
    const openclawFiles = await openclaw.renderFiles(
      processContext({ instructions: 'Answer in haiku only.' })
    )
    const openclawAgents = openclawFiles.find((file) => file.path === 'AGENTS.md')!
    assert.include(
      openclawAgents.content,
      '## Instructions from your owner\n\nAnswer in haiku only.'
    )

    const config = parseYaml(byPath['state:config.yaml'].content)
    assert.deepEqual(config.model, {
      default: 'local-dev',
      provider: 'agenthost',
      base_url: 'http://127.0.0.1:3333/v1',
    })
    assert.equal(config.custom_providers[0].key_env, 'AGENT_HOST_MODEL_KEY')
    assert.equal(config.terminal.cwd, folders.workspace)
    assert.notInclude(byPath['state:config.yaml'].content, 'proxy-token-123456')

    const dotenv = byPath['state:.env']
    assert.equal(dotenv.mode, 0o600)
    assert.include(dotenv.content, 'API_SERVER_ENABLED="true"')
    assert.include(dotenv.content, `API_SERVER_KEY="${'f'.repeat(48)}"`)
    assert.include(dotenv.content, 'API_SERVER_HOST="127.0.0.1"')
    assert.include(dotenv.content, 'API_SERVER_PORT="41234"')
    assert.include(dotenv.content, 'AGENT_HOST_MODEL_KEY="proxy-token-123456"')
  })

  test('the process driver runs hermes from a pinned venv of the runtime cache', async ({
    assert,
  }) => {
    const launch = await hermes.processLaunch(processContext(), folders, tools)
    const install = pythonInstalls.at(-1)!
    assert.equal(install.name, `hermes-agent@${HERMES_PYPI_VERSION}`)
    assert.include(install.requirements, `hermes-agent==${HERMES_PYPI_VERSION}`)
    for (const requirement of install.requirements)
      assert.match(requirement, /^[\w.[\]-]+==[\w.]+$/)
    assert.equal(launch.command, `/cache/python/${install.name}/bin/hermes`)
    assert.deepEqual(launch.args, ['gateway', 'run'])
    assert.equal(launch.env.HERMES_HOME, folders.state)
    assert.match(launch.env.PATH, new RegExp(`^/cache/python/${install.name}/bin:`))
    assert.equal(launch.env.API_SERVER_PORT, '41234')
  })

  test('chats as hermes-agent with the API server key; memory from memories/', async ({
    assert,
  }) => {
    assert.deepEqual(hermes.chatEndpoint({ agentId: 'a1', gatewayToken: 'k'.repeat(48) }), {
      path: '/v1/chat/completions',
      headers: { authorization: `Bearer ${'k'.repeat(48)}` },
      model: 'hermes-agent',
    })
    assert.equal(hermes.readinessPath, '/health')
    const memory = await hermes.readMemory(
      fakeReader({
        'state:memories/MEMORY.md': 'facts',
        'state:memories/USER.md': 'prefers short answers',
      })
    )
    assert.deepEqual(memory, {
      'memories/MEMORY.md': 'facts',
      'memories/USER.md': 'prefers short answers',
    })
  })
})
