import { randomUUID } from 'node:crypto'
import { existsSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { agentPaths } from '#runtime/agent_paths'
import { gatewayTokenFor } from '#runtime/credentials'
import { agentNetworkUnavailable } from '#runtime/process/agent_network/agent_networks'
import { criu } from '#runtime/process/checkpoint'
import { markedProcesses, readRecord } from '#runtime/process/process_record'
import { agentUid, bubblewrapWorks } from '#runtime/process/sandbox'
import { catalogueSkill, skillFilesFor } from '#skills/services/skill_catalogue'
import { startFakeModelProvider, type FakeModelProvider } from '#tests/helpers/fake_model_provider'
import { openclawUnavailable } from '#tests/helpers/openclaw'
import { processHarness, type RuntimeHarness } from '#tests/helpers/runtime'

/**
 * New OpenClaw agents from a template checkpoint (docs/runtime.md "New
 * agents from a template"): the real gateway, sandbox, CRIU and network
 * namespaces. The first agent boots cold (no template yet, counted) while
 * the template is built; the next is restored from it into its own uid,
 * folders and tokens, and must answer through its own gateway with its own
 * personality and skills, sleep and wake.
 */
const canTemplate =
  process.getuid?.() === 0 &&
  bubblewrapWorks() &&
  criu().path !== undefined &&
  agentNetworkUnavailable() === undefined

test.group('Runtime / new OpenClaw agents from a template (process driver, CRIU)', (group) => {
  let harness: RuntimeHarness
  let provider: FakeModelProvider
  group.each.setup(async () => {
    harness = await processHarness({ templates: true, stopGraceMs: 15_000 })
    provider = await startFakeModelProvider({ reply: 'Hello from the stand-in model.' })
    return async () => {
      await harness.cleanup()
      await provider.close()
    }
  })

  const spec = (agentId: string, personality: string) => ({
    agentId,
    framework: 'openclaw',
    config: { personality },
    skills: skillFilesFor(['translation']),
    modelProxy: { baseUrl: provider.baseUrl, token: `proxy-${agentId}`, model: 'stand-in-model' },
  })
  const started = async (agentId: string, personality: string) => {
    await harness.runtime.ensureStarted(spec(agentId, personality))
    await harness.runtime.waitUntilReady(agentId, { timeoutMs: 300_000 })
  }
  const fromTemplate = (agentId: string) =>
    harness.events.some(
      (event) => event.type === 'started' && event.agentId === agentId && event.fromTemplate
    )
  /** GET /v1/models of `agentId`'s gateway with the gateway token of `tokenOf`. */
  const modelsWithTokenOf = async (agentId: string, tokenOf: string) => {
    const info = await harness.runtime.status(agentId)
    const token = await gatewayTokenFor(agentPaths(harness.agentsDir, tokenOf).credentialsFile)
    const response = await fetch(`${info.baseUrl}/v1/models`, {
      headers: { authorization: `Bearer ${token}` },
    })
    await response.body?.cancel()
    return response.status
  }

  test(
    'the first agent boots cold (no template), the next starts from it as itself, sleeps and wakes'
  )
    .skip(
      async () => !canTemplate || (await openclawUnavailable()),
      'needs root, bubblewrap, CRIU 4.2+, agent network namespaces and the openclaw package'
    )
    .timeout(900_000)
    .run(async ({ assert }) => {
      const first = randomUUID()
      await started(first, 'You are First.')
      assert.isFalse(fromTemplate(first))
      assert.equal(harness.driver.templateCounts().coldBoots.missing, 1, 'counted')
      await harness.driver.whenTemplatesBuilt()

      const agentId = randomUUID()
      await started(agentId, 'You are Testy, a cheerful test agent who likes kites.')
      const paths = agentPaths(harness.agentsDir, agentId)
      assert.isTrue(fromTemplate(agentId), readFileSync(paths.logFile, 'utf8').slice(-3000))
      assert.equal(harness.driver.templateCounts().restored, 1)

      // Put to sleep before any turn it is still its template: no checkpoint, and its wake is
      // a start from the template again, which answers the turns below as itself.
      await harness.runtime.sleep(agentId)
      assert.include(
        readFileSync(paths.logFile, 'utf8'),
        'asleep: still as its template started it'
      )
      assert.isTrue(existsSync(paths.startsAsNewFile))
      const before = Date.now()
      await started(agentId, 'You are Testy, a cheerful test agent who likes kites.')
      assert.equal(
        harness.driver.templateCounts().restored,
        2,
        readFileSync(paths.logFile, 'utf8').slice(-3000)
      )

      // Its chat goes through its own gateway, to the model with its own proxy token, with
      // its own personality and skills (rendered for it, read after the restore).
      const reply = await harness.runtime.chat(agentId, {
        conversationId: 'template-1',
        messages: [{ role: 'user', content: 'Say hello to the test.' }],
      })
      console.log(`  openclaw from its template: first reply ${Date.now() - before} ms from start`)
      assert.equal(reply.content, 'Hello from the stand-in model.')
      assert.equal(reply.model, 'openclaw/default')
      const call = provider.requests.filter((r) => r.path.endsWith('/chat/completions')).at(-1)!
      assert.equal(call.headers.authorization, `Bearer proxy-${agentId}`)
      const prompt = JSON.stringify(call.body.messages)
      assert.include(prompt, 'likes kites')
      assert.include(prompt, catalogueSkill('translation')!.description.slice(0, 60))
      assert.include(prompt, 'Say hello to the test.')

      // Its own uid and token: the first agent's token is refused.
      assert.equal(await modelsWithTokenOf(agentId, agentId), 200)
      assert.equal(await modelsWithTokenOf(agentId, first), 401)
      const record = await readRecord(paths.recordFile)
      const gateway = markedProcesses(agentId).filter((pid) => pid !== record!.pid)
      assert.isAtLeast(gateway.length, 1)
      for (const pid of gateway) {
        const status = readFileSync(`/proc/${pid}/status`, 'utf8')
        const uid = agentUid(agentId)
        assert.match(status, new RegExp(`^Uid:\\s+${uid}\\s+${uid}\\s+${uid}\\s+${uid}$`, 'm'))
        assert.match(status, /^NoNewPrivs:\s+1$/m)
      }
      // Its state store is its own file, in its own folder.
      const store = statSync(join(paths.state, 'state', 'openclaw.sqlite'))
      assert.equal(store.uid, agentUid(agentId))

      // Sleep and wake: its own checkpoint, restored; it answers again.
      await harness.runtime.sleep(agentId)
      assert.deepEqual(markedProcesses(agentId), [])
      await started(agentId, 'You are Testy, a cheerful test agent who likes kites.')
      const woken = await harness.runtime.chat(agentId, {
        conversationId: 'template-1',
        messages: [{ role: 'user', content: 'Awake again?' }],
      })
      assert.equal(woken.content, 'Hello from the stand-in model.')
      assert.include(readFileSync(paths.logFile, 'utf8'), 'restored openclaw from its checkpoint')
      assert.equal(await modelsWithTokenOf(agentId, first), 401)

      await harness.runtime.stop(agentId)
      await harness.runtime.stop(first)
      assert.deepEqual(markedProcesses(agentId), [])
      assert.deepEqual(markedProcesses(first), [])
    })
})
