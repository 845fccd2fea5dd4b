import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { ioUringFilterFile, ioUringFilterProgram } from '#runtime/process/seccomp'

test.group('Seccomp filter file', () => {
  test('agents starting at once all get the one filter file, whole', async ({ assert }) => {
    const program = ioUringFilterProgram()
    if (!program) return assert.isUndefined(await ioUringFilterFile(tmpdir()))
    const dir = join(await mkdtemp(join(tmpdir(), 'agent-host-seccomp-')), 'sandbox')
    try {
      // Before: each concurrent call wrote the same `<file>.<pid>` and all but
      // the first rename failed with ENOENT (an agent start failed with it).
      const files = await Promise.all(Array.from({ length: 8 }, () => ioUringFilterFile(dir)))
      assert.lengthOf(new Set(files), 1)
      assert.deepEqual(await readFile(files[0]!), program)
      assert.deepEqual(await readdir(dir), [`no-io-uring-${process.arch}.bpf`], 'no partial left')
    } finally {
      await rm(join(dir, '..'), { recursive: true, force: true })
    }
  })
})
