import { randomUUID } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { test } from '@japa/runner'
import JSON5 from 'json5'
import { agentPaths } from '#runtime/agent_paths'
import { isAlive } from '#runtime/process/proc_stats'
import { criu } from '#runtime/process/checkpoint'
import { markedProcesses, readRecord } from '#runtime/process/process_record'
import { bubblewrapWorks } from '#runtime/process/sandbox'
import { catalogueSkill, skillFilesFor } from '#skills/services/skill_catalogue'
import { startFakeModelProvider, type FakeModelProvider } from '#tests/helpers/fake_model_provider'
import { openclawUnavailable } from '#tests/helpers/openclaw'
import { processHarness, type RuntimeHarness } from '#tests/helpers/runtime'

const canCheckpoint = process.getuid?.() === 0 && bubblewrapWorks() && criu().path !== undefined

test.group('Runtime / real OpenClaw through the process driver', (group) => {
  let harness: RuntimeHarness
  let provider: FakeModelProvider
  group.each.setup(async () => {
    harness = await processHarness({ stopGraceMs: 15_000 })
    provider = await startFakeModelProvider({ reply: 'Hello from the stand-in model.' })
    return async () => {
      await harness.cleanup()
      await provider.close()
    }
  })

  test('starts an openclaw agent, waits for /readyz and chats through its gateway')
    .skip(openclawUnavailable, 'the openclaw package could not be installed (reason printed above)')
    .timeout(420_000)
    .run(async ({ assert }) => {
      const agentId = randomUUID()
      const spec = {
        agentId,
        framework: 'openclaw',
        config: { personality: 'You are Testy, a cheerful test agent who likes kites.' },
        // An installed catalogue skill, rendered into the workspace's skills/ folder.
        skills: skillFilesFor(['translation']),
        modelProxy: {
          baseUrl: provider.baseUrl,
          token: 'proxy-token-for-openclaw-e2e',
          model: 'stand-in-model',
        },
      }
      const before = Date.now()
      const started = await harness.runtime.ensureStarted(spec)
      assert.equal(started.framework, 'openclaw')
      await harness.runtime.waitUntilReady(agentId, { timeoutMs: 240_000 })
      console.log(`  openclaw ready in ${((Date.now() - before) / 1000).toFixed(1)}s`)

      // What the plugin rendered.
      const paths = agentPaths(harness.agentsDir, agentId)
      const config = JSON5.parse(await readFile(join(paths.state, 'openclaw.json'), 'utf8'))
      assert.equal(config.gateway.mode, 'local')
      assert.equal(config.gateway.bind, 'loopback')
      assert.equal(config.gateway.auth.mode, 'token')
      assert.isTrue(config.gateway.http.endpoints.chatCompletions.enabled)
      assert.equal(config.agents.defaults.heartbeat.every, '0m')
      assert.notInclude(JSON.stringify(config), 'proxy-token-for-openclaw-e2e')
      assert.include(await readFile(join(paths.workspace, 'SOUL.md'), 'utf8'), 'likes kites')

      const reply = await harness.runtime.chat(agentId, {
        conversationId: 'conversation-e2e-1',
        messages: [{ role: 'user', content: 'Say hello to the test.' }],
      })
      assert.equal(reply.content, 'Hello from the stand-in model.')
      assert.equal(reply.model, 'openclaw/default')

      // The request reached the stand-in provider, streamed, with the agent's proxy token.
      const calls = provider.requests.filter((request) =>
        request.path.endsWith('/chat/completions')
      )
      assert.isAtLeast(calls.length, 1)
      const call = calls.at(-1)!
      assert.equal(call.headers.authorization, 'Bearer proxy-token-for-openclaw-e2e')
      assert.equal(call.body.model, 'stand-in-model')
      assert.isTrue(call.body.stream, 'OpenClaw streams upstream')
      assert.isAbove(call.rawLength, 10_000, 'OpenClaw sends its large system prompt')
      assert.include(
        JSON.stringify(call.body.messages),
        'likes kites',
        'SOUL.md reaches the prompt'
      )
      assert.include(JSON.stringify(call.body.messages), 'Say hello to the test.')
      // The installed skill reaches the model: OpenClaw lists it (name, description, location).
      const translation = catalogueSkill('translation')!
      assert.include(
        await readFile(join(paths.workspace, 'skills', 'translation', 'SKILL.md'), 'utf8'),
        translation.description
      )
      const prompt = JSON.stringify(call.body.messages)
      assert.include(prompt, 'translation')
      assert.include(
        prompt,
        translation.description.slice(0, 60),
        'the skill description is in the prompt'
      )

      const tokens: string[] = []
      const stream = harness.runtime.chatStream(agentId, {
        conversationId: 'conversation-e2e-1',
        messages: [{ role: 'user', content: 'And once more, streamed.' }],
      })
      for await (const chunk of stream) tokens.push(chunk.token)
      assert.equal(tokens.join(''), 'Hello from the stand-in model.')

      const figures = await harness.runtime.monitoring(agentId)
      console.log(`  openclaw resident memory ${figures.memoryMb} MB, cpu ${figures.cpuPercent}%`)
      assert.isAbove(figures.memoryMb, 100)
      assert.equal(figures.memoryLimitMb, 2048)

      const files = await harness.runtime.files(agentId)
      const listing = await files.list('/')
      const names = listing.map((entry) => entry.name)
      assert.includeMembers(names, ['SOUL.md', 'AGENTS.md', 'MEMORY.md'])
      const memory = await harness.runtime.memory(agentId)
      assert.equal(memory['MEMORY.md'], '# Memory\n')

      // Sleep and wake: with CRIU here the gateway is checkpointed and restored, not booted.
      const asleep = await readRecord(paths.recordFile)
      await harness.runtime.sleep(agentId)
      assert.isFalse(isAlive(asleep!.pid), 'nothing of it runs while it sleeps')
      assert.deepEqual(markedProcesses(agentId), [])
      const wakeStarted = Date.now()
      await harness.runtime.ensureStarted(spec)
      await harness.runtime.waitUntilReady(agentId, { timeoutMs: 240_000 })
      const woken = await harness.runtime.chat(agentId, {
        conversationId: 'conversation-e2e-1',
        messages: [{ role: 'user', content: 'Awake again?' }],
      })
      console.log(
        `  openclaw woke to a reply in ${((Date.now() - wakeStarted) / 1000).toFixed(1)}s`
      )
      assert.equal(woken.content, 'Hello from the stand-in model.')
      const log = await readFile(paths.logFile, 'utf8')
      if (canCheckpoint) {
        assert.include(log, 'restored openclaw from its checkpoint')
        // Still well a while later: its timers and state lease survived the sleep.
        await sleep(15_000)
        const later = await harness.runtime.chat(agentId, {
          conversationId: 'conversation-e2e-1',
          messages: [{ role: 'user', content: 'Still there?' }],
        })
        assert.equal(later.content, 'Hello from the stand-in model.')
        assert.notInclude(log.slice(log.lastIndexOf('restored openclaw')), 'exited with code')
      }

      const record = await readRecord(paths.recordFile)
      await harness.runtime.stop(agentId)
      assert.isFalse(isAlive(record!.pid), 'the gateway is gone after stop')
      assert.deepEqual(markedProcesses(agentId), [], 'nothing of it is left')
    })
})
