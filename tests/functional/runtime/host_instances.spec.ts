import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { ioUringFilterProgram } from '#runtime/process/seccomp'
import { startHostInstances, type HostInstances } from '#tests/helpers/host_instances'

/**
 * Two instances of the service on one host (docs/runtime.md "Many
 * machines"): the same STORAGE_DIR, database and Redis, each its own
 * server process and port, requests reaching either.
 */
test.group('Instances on one host (process driver): shared files', (group) => {
  let host: HostInstances
  group.setup(async () => {
    host = await startHostInstances(2)
    return () => host.destroy()
  })

  test('agents created through both instances at once all run; the files they share are whole', async ({
    assert,
  }) => {
    const [a, b] = host.instances
    const token = await host.account()
    // Four first starts at once on a fresh storage: both instances write the sandbox's
    // seccomp file, the agents' records and tokens at the same moment.
    const through = [a, b, a, b]
    const ids = await Promise.all(
      through.map((instance, index) => instance.createFixtureAgent(token, `Shared ${index}`))
    )
    for (const [index, id] of ids.entries()) {
      await through[index].waitUntilRunning(token, id, 60_000)
    }

    const sandbox = join(host.storage, 'runtime', 'sandbox')
    const bpf = readFileSync(join(sandbox, `no-io-uring-${process.arch}.bpf`))
    assert.isTrue(bpf.equals(ioUringFilterProgram()!), 'the seccomp filter is whole')
    assert.deepEqual(
      readdirSync(sandbox),
      [`no-io-uring-${process.arch}.bpf`],
      'nothing staged left'
    )
    for (const id of ids) {
      const runtime = join(host.storage, 'agents', '.runtime', id)
      const credentials = JSON.parse(readFileSync(join(runtime, 'credentials.json'), 'utf8'))
      assert.lengthOf(credentials.gatewayToken, 48)
      const record = JSON.parse(readFileSync(join(runtime, 'process.json'), 'utf8'))
      assert.equal(record.agentId, id)
      assert.notInclude(readdirSync(runtime).join(' '), '.partial')
    }
    for (const instance of host.instances) {
      assert.notMatch(instance.server.output(), /ENOENT|EEXIST|ENOTEMPTY/)
    }
  }).timeout(240_000)
})
