import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { noDockerEngine } from '#tests/helpers/docker_engine'
import db from '@adonisjs/lucid/services/db'
import Docker from 'dockerode'
import { proxyTokenOf } from '#agents/services/agent_tokens'
import { dockerNames } from '#runtime/docker/container_spec'
import { DockerDriver } from '#runtime/docker/docker_driver'
import { RuntimeService } from '#runtime/runtime_service'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { baseUrl } from '#tests/helpers/http'
import { createUser, creditsOf } from '#tests/helpers/identity'
import { startModelUpstream, useUpstream } from '#tests/helpers/model_upstream'
import { sharedCacheDir, testRegistry } from '#tests/helpers/runtime'

/**
 * The real Hermes Agent in a container on a real Docker engine, from an
 * image built here (no registry): the runtime cache's venv, this host's
 * python3 and the libraries they load. Read-only root, state on a volume;
 * the model reached through the driver's relay and the service's own
 * metered model proxy; memory written by Hermes' memory tool kept across a
 * restart.
 */
test.group('Runtime / real Hermes Agent in a Docker container', () => {
  test(
    'a locally built Hermes image boots, chats through the metered model proxy and keeps its memory across a restart'
  )
    .skip(noDockerEngine, 'no Docker engine')
    .timeout(600_000)
    .run(async ({ assert }) => {
      const agentsDir = await mkdtemp(join(tmpdir(), 'agent-host-hermes-docker-'))
      const driver = new DockerDriver({ agentsDir, cacheDir: sharedCacheDir(), images: 'local' })
      const runtime = new RuntimeService({ driver, frameworks: await testRegistry(), agentsDir })
      const upstream = await startModelUpstream({
        reply: 'Hermes answers from Docker.',
        usage: { prompt_tokens: 40, completion_tokens: 5 },
      })
      // 1 credit per input token, 2 per output token: 50 credits per model call.
      const restore = useUpstream(upstream, {
        defaultModel: 'hermes-docker-model',
        rates: { 'hermes-docker-model': { input: 1_000_000, output: 2_000_000 } },
      })
      const owner = await createUser({ credits: 5_000_000 })
      const agent = await createAgentFor(owner, { framework: 'hermes' })
      const spec = {
        agentId: agent.id,
        framework: 'hermes',
        config: { personality: 'You are Harbor, who keeps containers tidy.' },
        modelProxy: {
          baseUrl: `${baseUrl()}/v1`,
          token: proxyTokenOf(agent),
          model: 'hermes-docker-model',
        },
      }
      try {
        const before = Date.now()
        await runtime.ensureStarted(spec, { waitReady: true, timeoutMs: 400_000 })
        console.log(`  hermes in docker ready in ${((Date.now() - before) / 1000).toFixed(1)}s`)
        const engine = await new Docker().getContainer(dockerNames(agent.id).container).inspect()
        assert.match(engine.Config.Image, /^agent-host\/hermes:/)
        assert.isTrue(engine.HostConfig.ReadonlyRootfs)

        const balance = await creditsOf(owner)
        const reply = await runtime.chat(agent.id, {
          conversationId: 'docker-1',
          messages: [{ role: 'user', content: 'Hello from the test.' }],
        })
        assert.equal(reply.content, 'Hermes answers from Docker.')
        const calls = upstream.requests.filter((r) => r.path.endsWith('/chat/completions'))
        assert.isAbove(calls.length, 0)
        assert.equal(calls[0].headers.authorization, 'Bearer upstream-secret-key')
        assert.include(JSON.stringify(calls[0].body.messages), 'keeps containers tidy')
        const charged = await db
          .from('credit_ledger')
          .where({ user_id: owner.id, kind: 'llm' })
          .whereRaw(`metadata->>'agentId' = ?`, [agent.id])
        assert.lengthOf(charged, calls.length, 'each model call metered once')
        assert.equal(await creditsOf(owner), balance - 50 * calls.length)

        // Hermes' memory tool writes to its state volume; a restart keeps it.
        upstream.set({
          toolCall: (body) =>
            JSON.stringify(body.messages.at(-1)).includes('Remember the blue crate')
              ? {
                  name: 'memory',
                  arguments: {
                    action: 'add',
                    target: 'memory',
                    content: 'The blue crate is ours.',
                  },
                }
              : undefined,
        })
        await runtime.chat(agent.id, {
          conversationId: 'docker-2',
          messages: [{ role: 'user', content: 'Remember the blue crate.' }],
        })
        upstream.set({ toolCall: undefined })
        await runtime.restart(spec, { waitReady: true, timeoutMs: 120_000 })
        const memory = await runtime.memory(agent.id)
        assert.include(memory['memories/MEMORY.md'], 'The blue crate is ours.')
      } catch (error) {
        const lines = await driver.logs(agent.id, 60).catch(() => [])
        console.log(lines.join('\n'))
        throw error
      } finally {
        await runtime.remove(agent.id).catch(() => undefined)
        await runtime.shutdown()
        restore()
        await upstream.close()
        await agent.delete()
        await rm(agentsDir, { recursive: true, force: true })
      }
    })
})
