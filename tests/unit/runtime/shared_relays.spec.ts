import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { SharedRelays } from '#runtime/process/agent_network/shared_relays'

test.group('Runtime / shared model proxy relays', () => {
  test('recording its port leaves <storage>/runtime reachable by agents; only the ports folder is private', async ({
    assert,
  }) => {
    const storage = mkdtempSync(join(tmpdir(), 'relays-'))
    const dir = join(storage, 'runtime', 'relays')
    const relays = new SharedRelays({ host: '127.0.0.1', dir, open: async () => {}, log: () => {} })
    try {
      const port = await relays.own(new URL('http://127.0.0.1:9'))
      assert.deepEqual(readdirSync(dir), [String(port)])
      // A fresh checkout: the runtime folder (framework caches agents run from) is made here first.
      assert.equal(statSync(join(storage, 'runtime')).mode & 0o777, 0o755 & ~process.umask())
      assert.equal(statSync(dir).mode & 0o777, 0o700)
    } finally {
      await relays.close()
      rmSync(storage, { recursive: true, force: true })
    }
  })
})
