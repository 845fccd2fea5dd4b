import { randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import Docker from 'dockerode'
import { dockerNames } from '#runtime/docker/container_spec'
import { DockerDriver, dockerConfigured } from '#runtime/docker/docker_driver'
import { RuntimeService } from '#runtime/runtime_service'
import { startModelUpstream } from '#tests/helpers/model_upstream'
import { sharedCacheDir, testRegistry } from '#tests/helpers/runtime'

async function noEngine(): Promise<boolean> {
  const up =
    dockerConfigured() &&
    (await new Docker().ping().then(
      () => true,
      () => false
    ))
  if (!up) console.log('  SKIPPED: no Docker engine')
  return !up
}

/**
 * The real Hermes Agent in a container on a real Docker engine, from an
 * image built here (no registry): the runtime cache's venv, this host's
 * python3 and the libraries they load. Read-only root, state on a volume,
 * the model reached through the driver's relay.
 */
test.group('Runtime / real Hermes Agent in a Docker container', () => {
  test('a locally built Hermes image boots, answers through its API server and reaches the model')
    .skip(noEngine, 'no Docker engine')
    .timeout(600_000)
    .run(async ({ assert }) => {
      const agentsDir = await mkdtemp(join(tmpdir(), 'agent-host-hermes-docker-'))
      const driver = new DockerDriver({ agentsDir, cacheDir: sharedCacheDir(), images: 'local' })
      const runtime = new RuntimeService({ driver, frameworks: await testRegistry(), agentsDir })
      const upstream = await startModelUpstream({ reply: 'Hermes answers from Docker.' })
      const agentId = randomUUID()
      try {
        const before = Date.now()
        await runtime.ensureStarted(
          {
            agentId,
            framework: 'hermes',
            config: { personality: 'You are Harbor, who keeps containers tidy.' },
            modelProxy: {
              baseUrl: upstream.baseUrl,
              token: 'proxy-token-hermes-docker',
              model: 'stand-in',
            },
          },
          { waitReady: true, timeoutMs: 400_000 }
        )
        console.log(`  hermes in docker ready in ${((Date.now() - before) / 1000).toFixed(1)}s`)
        const engine = await new Docker().getContainer(dockerNames(agentId).container).inspect()
        assert.match(engine.Config.Image, /^agent-host\/hermes:/)
        assert.isTrue(engine.HostConfig.ReadonlyRootfs)

        const reply = await runtime.chat(agentId, {
          conversationId: 'docker-1',
          messages: [{ role: 'user', content: 'Hello from the test.' }],
        })
        assert.equal(reply.content, 'Hermes answers from Docker.')
        const call = upstream.requests.filter((r) => r.path.endsWith('/chat/completions')).at(-1)!
        assert.equal(call.headers.authorization, 'Bearer proxy-token-hermes-docker')
        assert.include(JSON.stringify(call.body.messages), 'keeps containers tidy')
      } catch (error) {
        const lines = await driver.logs(agentId, 60).catch(() => [])
        console.log(lines.join('\n'))
        throw error
      } finally {
        await runtime.remove(agentId).catch(() => undefined)
        await runtime.shutdown()
        await upstream.close()
        await rm(agentsDir, { recursive: true, force: true })
      }
    })
})
