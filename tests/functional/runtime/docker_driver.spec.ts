import { randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { networkInterfaces, tmpdir } from 'node:os'
import { join } from 'node:path'
import http from 'node:http'
import net, { type AddressInfo } from 'node:net'
import { test } from '@japa/runner'
import Docker from 'dockerode'
import { AgentNotRunningException, ForbiddenException } from '#core/exceptions/api_exceptions'
import { dockerNames } from '#runtime/docker/container_spec'
import { demuxDockerLogs } from '#runtime/docker/docker_streams'
import { DockerDriver, dockerConfigured } from '#runtime/docker/docker_driver'
import { RuntimeService } from '#runtime/runtime_service'
import { dial, PRIVATE_LAN, startPrivateLan } from '#tests/helpers/private_lan'
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

  test(
    'a container reaches the service only through the model proxy relay, and no other host service'
  )
    .skip(noEngine, 'no Docker engine (reason printed above)')
    .timeout(300_000)
    .run(async ({ assert }) => {
      // The service's model proxy, on the host's loopback as the service itself is.
      const service = http.createServer((request, response) => {
        response.writeHead(200, { 'content-type': 'application/json' })
        response.end(JSON.stringify({ reached: request.url }))
      })
      await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve))
      // Another service of the host, listening on every interface.
      const other = net.createServer((socket) => {
        socket.on('error', () => undefined)
        socket.end('leaked\n')
      })
      await new Promise<void>((resolve) => other.listen(0, '0.0.0.0', resolve))
      const otherPort = (other.address() as AddressInfo).port
      // As root: a private-range address of this machine and the host's own address, both
      // first reached from the host.
      const asRoot = process.getuid?.() === 0
      const removeLan = asRoot ? await startPrivateLan() : undefined
      const ownAddress = Object.entries(networkInterfaces())
        .filter(
          ([name]) => name !== 'lo' && !name.startsWith('docker') && name !== PRIVATE_LAN.veth
        )
        .flatMap(([, entries]) => entries ?? [])
        .find((entry) => entry.family === 'IPv4' && !entry.internal)?.address
      const reached: Array<[string, string, number]> = asRoot
        ? [
            ['a private-range address of this machine', PRIVATE_LAN.peer, PRIVATE_LAN.port],
            ...(ownAddress
              ? [
                  ["a host service on the host's own address", ownAddress, otherPort] as [
                    string,
                    string,
                    number,
                  ],
                ]
              : []),
          ]
        : []
      try {
        for (const [what, host, port] of reached) {
          assert.equal(await dial(host, port), 'connected', `${what} answers the host`)
        }
        const agentId = randomUUID()
        created.push(agentId)
        const spec = fixtureSpec(agentId)
        spec.modelProxy.baseUrl = `http://127.0.0.1:${(service.address() as AddressInfo).port}/v1`
        await runtime.ensureStarted(spec, { waitReady: true, timeoutMs: 240_000 })
        const container = new Docker().getContainer(dockerNames(agentId).container)

        const probe = await execNode(
          container,
          `const net = require('node:net')
          const out = {}
          const model = process.env.FIXTURE_MODEL_URL
          out.model = model
          out.proxy = await fetch(model + '/models').then(async (r) => { const text = await r.text(); try { return JSON.parse(text) } catch { return r.status + ' ' + text } }, (e) => String(e))
          out.other = await fetch(model.slice(0, -'/v1'.length) + '/health').then((r) => r.status, (e) => String(e))
          out.hostService = await new Promise((resolve) => {
            const socket = net.connect(${otherPort}, 'host.docker.internal')
            socket.setTimeout(3000, () => { socket.destroy(); resolve('timeout') })
            socket.once('data', (data) => resolve(String(data).trim()))
            socket.once('error', (error) => resolve(error.code))
          })
          out.reached = await Promise.all(${JSON.stringify(reached.map(([, host, port]) => [host, port]))}.map(([host, port]) => new Promise((resolve) => {
            const socket = net.connect(port, host)
            socket.setTimeout(3000, () => { socket.destroy(); resolve('timeout') })
            socket.once('connect', () => { socket.destroy(); resolve('connected') })
            socket.once('error', (error) => resolve(error.code))
          })))
          console.log(JSON.stringify(out))`
        )
        const result = JSON.parse(probe)
        assert.match(result.model, /^http:\/\/host\.docker\.internal:\d+\/v1$/)
        assert.deepEqual(result.proxy, { reached: '/v1/models' }, 'the model proxy answers')
        assert.equal(result.other, 404, 'nothing but the model proxy through the relay')
        if (process.getuid?.() === 0) {
          assert.notEqual(
            result.hostService,
            'leaked',
            'the host’s other services are out of reach'
          )
          assert.oneOf(result.hostService, ['ECONNREFUSED', 'EHOSTUNREACH', 'timeout'])
          reached.forEach(([what, host, port], index) => {
            assert.oneOf(
              result.reached[index],
              ['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'timeout'],
              `${what} (${host}:${port}) from the container`
            )
          })
        }
      } finally {
        service.close()
        other.close()
        await removeLan?.()
      }
    })
})

/** Runs a Node.js script in the container; answers its standard output. */
async function execNode(container: Docker.Container, script: string): Promise<string> {
  const exec = await container.exec({
    Cmd: ['node', '-e', `(async () => { ${script} })()`],
    AttachStdout: true,
    AttachStderr: true,
  })
  const stream = await exec.start({ hijack: true, stdin: false })
  const chunks: Buffer[] = []
  for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(chunk)
  const output = demuxDockerLogs(Buffer.concat(chunks)).trim()
  if (!output.endsWith('}')) throw new Error(`the script failed in the container:\n${output}`)
  return output.split('\n').at(-1) ?? ''
}
