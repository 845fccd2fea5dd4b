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
import { childPids, sharedCacheDir, testRegistry, waitFor } from '#tests/helpers/runtime'

/**
 * The real Hermes Agent in a container on a real Docker engine, from an
 * image built here (no registry): the runtime cache's venv, this host's
 * python3 and the libraries they load. Read-only root, state on a volume;
 * the model reached through the driver's relay and the service's own
 * metered model proxy; memory written by Hermes' memory tool kept across a
 * restart; streamed chat, files and logs; a crash of the gateway restarted
 * by Docker; sleep (container stopped) and wake with its memory kept.
 */
test.group('Runtime / real Hermes Agent in a Docker container', () => {
  test(
    'a locally built Hermes image boots, chats (plain and streamed) through the metered model proxy, keeps its memory across a restart, serves files and logs, survives a crash and sleeps and wakes'
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

        // Streamed chat through its API server.
        let streamed = ''
        for await (const piece of runtime.chatStream(agent.id, {
          conversationId: 'docker-stream',
          messages: [{ role: 'user', content: 'Stream it.' }],
        })) {
          streamed += piece.token
        }
        assert.equal(streamed, 'Hermes answers from Docker.')

        // Files of its workspace (on the state volume) and the container's log.
        const files = await runtime.files(agent.id)
        await files.write('notes/crates.md', 'blue')
        assert.deepInclude(await files.list('notes'), { name: 'crates.md', type: 'file', size: 4 })
        const read = await files.read('notes/crates.md')
        assert.equal(read.content, 'blue')
        assert.include(await runtime.logs(agent.id, { tail: 200 }), 'gateway.platforms.api_server')

        // A crash: the gateway process (docker-init's child) is killed from the host; Docker
        // restarts the container and it answers again.
        const container = new Docker().getContainer(dockerNames(agent.id).container)
        const running = await container.inspect()
        const initPid = running.State.Pid
        const gatewayPids = await childPids(initPid)
        assert.isNotEmpty(gatewayPids, 'the gateway runs under docker-init')
        for (const pid of gatewayPids) process.kill(pid, 'SIGKILL')
        await waitFor(
          'Docker to restart the crashed container',
          async () => {
            const after = await container.inspect()
            return after.RestartCount > running.RestartCount && after.State.Running
          },
          60_000
        )
        await runtime.waitUntilReady(agent.id, { timeoutMs: 120_000 })
        const afterCrash = await runtime.chat(agent.id, {
          conversationId: 'docker-crash',
          messages: [{ role: 'user', content: 'Still there?' }],
        })
        assert.equal(afterCrash.content, 'Hermes answers from Docker.')

        // Sleep (scale to zero: the container stops, its volume stays) and wake.
        await runtime.sleep(agent.id)
        assert.isFalse(await runtime.isRunning(agent.id), 'asleep: its container stopped')
        await runtime.ensureStarted(spec, { waitReady: true, timeoutMs: 120_000 })
        assert.isTrue(await runtime.isRunning(agent.id), 'awake again')
        const woken = await runtime.memory(agent.id)
        assert.include(woken['memories/MEMORY.md'], 'The blue crate is ours.')
        const kept = await runtime.files(agent.id)
        const crates = await kept.read('notes/crates.md')
        assert.equal(crates.content, 'blue', 'its files kept across the sleep')
        const afterWake = await runtime.chat(agent.id, {
          conversationId: 'docker-wake',
          messages: [{ role: 'user', content: 'Good morning.' }],
        })
        assert.equal(afterWake.content, 'Hermes answers from Docker.')
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
