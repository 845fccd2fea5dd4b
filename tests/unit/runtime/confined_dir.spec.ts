import { spawn } from 'node:child_process'
import { once } from 'node:events'
import {
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import {
  chownTreeBelow,
  readFileBelow,
  removeBelow,
  writeFileBelow,
} from '#runtime/files/confined_dir'

const asRoot = process.getuid?.() === 0

/**
 * A racer that keeps swapping `<folder>` for a link to `outside` and back,
 * as an agent would while the service works in its folders.
 */
function swapper(folder: string, outside: string) {
  const script = `
    const fs = require('node:fs')
    const [folder, outside] = process.argv.slice(1)
    for (;;) {
      try { fs.renameSync(folder, folder + '.real'); fs.symlinkSync(outside, folder) } catch {}
      try { fs.unlinkSync(folder); fs.renameSync(folder + '.real', folder) } catch {}
    }
  `
  return spawn(process.execPath, ['-e', script, folder, outside], { stdio: 'ignore' })
}

test.group('confined_dir: the one no-follow helper for agent folders', (group) => {
  let root: string
  let base: string
  let outside: string
  group.each.setup(async () => {
    root = await mkdtemp(join(tmpdir(), 'confined-dir-'))
    base = join(root, 'agents')
    outside = join(root, 'outside')
    await mkdir(join(base, 'a', 'sub'), { recursive: true })
    await mkdir(outside)
    await writeFile(join(outside, 'secret'), 'root only', { mode: 0o600 })
    return () => rm(root, { recursive: true, force: true })
  })

  test('a write replaces a link at its name and never writes through it; a read of a link is nothing', async ({
    assert,
  }) => {
    await symlink(join(outside, 'secret'), join(base, 'a', 'SOUL.md'))
    assert.equal(await readFile(join(base, 'a', 'SOUL.md'), 'utf8'), 'root only', 'the link works')
    assert.isUndefined(await readFileBelow(base, join(base, 'a', 'SOUL.md'), 1024))
    await writeFileBelow(base, join(base, 'a', 'SOUL.md'), 'soul', { mode: 0o644 })
    assert.equal(await readFile(join(outside, 'secret'), 'utf8'), 'root only')
    const written = await lstat(join(base, 'a', 'SOUL.md'))
    assert.isTrue(written.isFile())
    assert.equal(written.mode & 0o777, 0o644)
    const readBack = await readFileBelow(base, join(base, 'a', 'SOUL.md'), 1024)
    assert.equal(readBack?.toString(), 'soul')
  })

  test('a folder of the path replaced by a link is made a folder again for a write', async ({
    assert,
  }) => {
    await rm(join(base, 'a', 'sub'), { recursive: true })
    await symlink(outside, join(base, 'a', 'sub'))
    await writeFileBelow(base, join(base, 'a', 'sub', 'x.md'), 'x', { mode: 0o644 })
    assert.deepEqual(await readdir(outside), ['secret'])
    const folder = await lstat(join(base, 'a', 'sub'))
    assert.isTrue(folder.isDirectory())
  })

  test('a delete descends folders only, unlinks links, and removes trees deeper than its descriptor limit', async ({
    assert,
  }) => {
    await symlink(outside, join(base, 'a', 'sub', 'link'))
    let deep = join(base, 'a', 'sub')
    for (let level = 0; level < 300; level++) {
      deep = join(deep, 'd')
      await mkdir(deep)
    }
    await writeFile(join(deep, 'bottom'), 'x')
    await removeBelow(base, join(base, 'a'))
    assert.deepEqual(await readdir(base), [])
    assert.deepEqual(await readdir(outside), ['secret'])
  })

  test('chown of a tree while the agent swaps a folder for a link never changes what the link points to', async ({
    assert,
  }) => {
    await writeFile(join(base, 'a', 'sub', 'file'), 'x')
    const racer = swapper(join(base, 'a', 'sub'), outside)
    try {
      // The path-based walk this replaced chowned the outside file after 675 rounds here.
      for (let round = 0; round < 2000; round++) {
        await chownTreeBelow(base, join(base, 'a'), { uid: 4_242_424, gid: 4_242_424 }).catch(
          () => undefined
        )
      }
    } finally {
      // Until it has exited: a racer still swapping makes the folder's removal fail (ENOTEMPTY).
      const exited = racer.exitCode === null ? once(racer, 'exit') : undefined
      racer.kill('SIGKILL')
      await exited
    }
    const secret = await stat(join(outside, 'secret'))
    assert.equal(secret.uid, 0)
    const outsideFolder = await stat(outside)
    assert.equal(outsideFolder.uid, 0)
  })
    .timeout(60_000)
    .skip(!asRoot, 'needs root (chown)')
})
