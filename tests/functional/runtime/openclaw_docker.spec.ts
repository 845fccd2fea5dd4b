import { randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import Docker from 'dockerode'
import { dockerNames } from '#runtime/docker/container_spec'
import { DockerDriver, dockerConfigured } from '#runtime/docker/docker_driver'
import { PackageCache } from '#runtime/package_cache'
import { RuntimeService } from '#runtime/runtime_service'
import { OPENCLAW_VERSION } from '../../../plugins/openclaw/index.ts'
import { startFakeModelProvider } from '#tests/helpers/fake_model_provider'
import { sharedCacheDir, testRegistry } from '#tests/helpers/runtime'

let problem: string | undefined
let checked = false
/** Needs an engine and the openclaw package in the runtime cache (the process e2e installs it). */
async function unavailable(): Promise<boolean> {
  if (!checked) {
    checked = true
    if (
      !dockerConfigured() ||
      !(await new Docker().ping().then(
        () => true,
        () => false
      ))
    ) {
      problem = 'no Docker engine'
    } else {
      try {
        await new PackageCache({ cacheDir: sharedCacheDir() }).ensure('openclaw', OPENCLAW_VERSION)
      } catch (error) {
        problem = `openclaw could not be installed: ${(error as Error).message}`
      }
    }
    if (problem) console.log(`  SKIPPED: ${problem}`)
  }
  return problem !== undefined
}

test.group('Runtime / real OpenClaw in a Docker container', () => {
  test(
    'a locally built OpenClaw image boots, answers through its gateway and reaches the model proxy'
  )
    .skip(unavailable, 'reason printed above')
    .timeout(600_000)
    .run(async ({ assert }) => {
      const agentsDir = await mkdtemp(join(tmpdir(), 'agent-host-openclaw-docker-'))
      const driver = new DockerDriver({ agentsDir, cacheDir: sharedCacheDir(), images: 'local' })
      const runtime = new RuntimeService({ driver, frameworks: await testRegistry(), agentsDir })
      const provider = await startFakeModelProvider({ reply: 'Hello from inside Docker.' })
      const agentId = randomUUID()
      try {
        const before = Date.now()
        await runtime.ensureStarted(
          {
            agentId,
            framework: 'openclaw',
            config: { personality: 'You are Dockery, who likes containers.' },
            modelProxy: {
              baseUrl: provider.baseUrl,
              token: 'proxy-token-docker',
              model: 'stand-in',
            },
          },
          { waitReady: true, timeoutMs: 400_000 }
        )
        console.log(`  openclaw in docker ready in ${((Date.now() - before) / 1000).toFixed(1)}s`)
        const engine = await new Docker().getContainer(dockerNames(agentId).container).inspect()
        assert.match(engine.Config.Image, /^agent-host\/openclaw:/)
        assert.isTrue(engine.HostConfig.ReadonlyRootfs)

        const reply = await runtime.chat(agentId, {
          conversationId: 'docker-1',
          messages: [{ role: 'user', content: 'Say hello from the container.' }],
        })
        assert.equal(reply.content, 'Hello from inside Docker.')
        const call = provider.requests.filter((r) => r.path.endsWith('/chat/completions')).at(-1)!
        assert.equal(call.headers.authorization, 'Bearer proxy-token-docker')
        assert.include(JSON.stringify(call.body.messages), 'likes containers')
      } catch (error) {
        const lines = await driver.logs(agentId, 60)
        console.log(lines.join('\n'))
        throw error
      } finally {
        await runtime.remove(agentId).catch(() => undefined)
        await runtime.shutdown()
        await provider.close()
        await rm(agentsDir, { recursive: true, force: true })
      }
    })
})
