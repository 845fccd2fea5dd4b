import { randomUUID } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { delimiter, join } from 'node:path'
import { test } from '@japa/runner'
import app from '@adonisjs/core/services/app'
import { agentPaths } from '#runtime/agent_paths'
import { processHarness, type RuntimeHarness } from '#tests/helpers/runtime'

/**
 * The hermes plugin through the process driver, with a stand-in `hermes`
 * executable (tests/fixtures/bin/hermes) on PATH: checks the launch, the
 * rendered HERMES_HOME and the chat wiring. The real Hermes Agent is a
 * Python program not installed on this machine.
 */
test.group('Runtime / hermes through the process driver', (group) => {
  let harness: RuntimeHarness
  group.each.setup(async () => {
    harness = await processHarness()
    return () => harness.cleanup()
  })

  test('runs `hermes gateway run` from PATH with its rendered home', async ({ assert }) => {
    const agentId = randomUUID()
    const saved = process.env.PATH
    process.env.PATH = [app.makePath('tests/fixtures/bin'), saved].join(delimiter)
    try {
      await harness.runtime.ensureStarted({
        agentId,
        framework: 'hermes',
        config: { personality: 'A patient hermes test agent.' },
        modelProxy: {
          baseUrl: 'http://127.0.0.1:9/v1',
          token: 'proxy-token-hermes',
          model: 'local-dev',
        },
      })
    } finally {
      process.env.PATH = saved
    }
    await harness.runtime.waitUntilReady(agentId, { timeoutMs: 15_000 })
    const reply = await harness.runtime.chat(agentId, {
      conversationId: 'c1',
      messages: [{ role: 'user', content: 'ping' }],
    })
    assert.equal(reply.content, 'A patient hermes test agent. | ping')
    assert.include(await harness.runtime.logs(agentId), 'fake hermes chat model=hermes-agent')

    const state = agentPaths(harness.agentsDir, agentId).state
    const dotenv = await readFile(join(state, '.env'), 'utf8')
    assert.include(dotenv, 'API_SERVER_ENABLED="true"')
    assert.include(
      await readFile(join(state, 'config.yaml'), 'utf8'),
      'key_env: AGENT_HOST_MODEL_KEY'
    )
    assert.deepEqual(await harness.runtime.memory(agentId), {
      'memories/MEMORY.md': '',
      'memories/USER.md': '',
    })
  }).timeout(30_000)

  test('without a hermes executable the start fails with what to install', async ({ assert }) => {
    const agentId = randomUUID()
    const saved = process.env.PATH
    process.env.PATH = '/usr/bin:/bin'
    try {
      await assert.rejects(
        () =>
          harness.runtime.ensureStarted({
            agentId,
            framework: 'hermes',
            config: {},
            modelProxy: {
              baseUrl: 'http://127.0.0.1:9/v1',
              token: 'proxy-token-hermes',
              model: 'local-dev',
            },
          }),
        /Install Hermes Agent/
      )
    } finally {
      process.env.PATH = saved
    }
    const error = harness.events.find(
      (event) => event.type === 'error' && event.agentId === agentId
    )
    assert.include(
      error && 'message' in error ? error.message : '',
      'no `hermes` executable is on PATH'
    )
  })
})
