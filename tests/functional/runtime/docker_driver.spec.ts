import { randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import Docker from 'dockerode'
import { AgentNotRunningException, ForbiddenException } from '#core/exceptions/api_exceptions'
import { dockerNames } from '#runtime/docker/container_spec'
import { DockerDriver, dockerConfigured } from '#runtime/docker/docker_driver'
import { RuntimeService } from '#runtime/runtime_service'
import { fixtureSpec, testRegistry } from '#tests/helpers/runtime'

let reported = false
/** Live tests need an engine; without one they are skipped with the reason printed. */
function noEngine(): boolean {
  if (dockerConfigured()) return false
  if (!reported) {
    reported = true
    console.log('  SKIPPED: no Docker engine here (DOCKER_HOST unset and no /var/run/docker.sock)')
  }
  return true
}

test.group('Runtime / docker driver against a live engine', (group) => {
  let agentsDir: string
  let runtime: RuntimeService
  const created: string[] = []

  group.setup(async () => {
    if (!dockerConfigured()) return
    agentsDir = await mkdtemp(join(tmpdir(), 'agent-host-docker-'))
    const driver = new DockerDriver({ agentsDir, pollIntervalMs: 500, stopGraceMs: 3000 })
    runtime = new RuntimeService({ driver, frameworks: await testRegistry(), agentsDir })
  })
  group.teardown(async () => {
    if (!runtime) return
    for (const agentId of created) await runtime.remove(agentId).catch(() => undefined)
    await runtime.shutdown()
    await rm(agentsDir, { recursive: true, force: true })
  })

  test('runs an agent container: ready, chat, logs, files, monitoring, stop, restart, remove')
    .skip(noEngine, 'no Docker engine (reason printed above)')
    .timeout(300_000)
    .run(async ({ assert }) => {
      const agentId = randomUUID()
      created.push(agentId)
      const started = await runtime.ensureStarted(fixtureSpec(agentId), {
        waitReady: true,
        timeoutMs: 240_000,
      })
      assert.equal(started.driver, 'docker')
      assert.equal(started.state, 'running')
      assert.match(started.baseUrl!, /^http:\/\/127\.0\.0\.1:\d+$/)

      const engine = await new Docker().getContainer(dockerNames(agentId).container).inspect()
      assert.deepEqual(engine.HostConfig.CapDrop, ['ALL'])
      assert.isTrue(engine.HostConfig.ReadonlyRootfs, 'read-only root file system')
      assert.include(engine.HostConfig.SecurityOpt ?? [], 'no-new-privileges:true')
      // No registry here: the fixture's image was built on this host from its Node.js.
      assert.match(engine.Config.Image, /^agent-host\/fixture:1\.0\.0-node/)
      assert.equal(engine.Config.User, '1000:1000')
      assert.equal(engine.Config.Labels['agent-host.agent-id'], agentId)

      const reply = await runtime.chat(agentId, {
        conversationId: 'c',
        messages: [{ role: 'user', content: 'hello container' }],
      })
      assert.equal(reply.content, 'echo: hello container')
      assert.include(await runtime.logs(agentId, { tail: 50 }), 'listening on 0.0.0.0:8080')

      const files = await runtime.files(agentId)
      assert.deepEqual(await files.write('/notes/a.txt', 'inside'), {
        path: '/notes/a.txt',
        size: 6,
      })
      assert.deepEqual(await files.read('notes/a.txt'), { content: 'inside', size: 6 })
      assert.deepInclude(await files.list('/'), { name: 'notes', type: 'directory', size: 0 })
      await assert.rejects(() => files.read('../fixture.json'), ForbiddenException)
      await assert.rejects(() => files.read('/etc/passwd'), ForbiddenException)
      await assert.rejects(() => files.read('/data/fixture.json'), ForbiddenException)
      assert.deepEqual(await files.delete('notes'), { deleted: '/notes' })

      await runtime.chat(agentId, {
        conversationId: 'c',
        messages: [{ role: 'user', content: '__remember__ color=green' }],
      })
      assert.deepEqual(await runtime.memory(agentId), { color: 'green' })

      const figures = await runtime.monitoring(agentId)
      assert.isAbove(figures.memoryMb, 5)
      assert.equal(figures.memoryLimitMb, 256)

      await runtime.stop(agentId)
      const stopped = await runtime.status(agentId)
      assert.equal(stopped.state, 'stopped')
      await assert.rejects(() => runtime.monitoring(agentId), AgentNotRunningException)

      const again = await runtime.restart(fixtureSpec(agentId), {
        waitReady: true,
        timeoutMs: 120_000,
      })
      assert.notEqual(again.containerId, started.containerId)

      await runtime.remove(agentId)
      const removed = await runtime.status(agentId)
      assert.equal(removed.state, 'absent')
    })
})
