import { existsSync } from 'node:fs'
import {
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  readlink,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { seedCompileCache, sharedCacheDir } from '../../../plugins/openclaw/compile_cache.ts'

const warmedBy = process.getuid?.() ?? 0
const tag = `v${process.versions.node}-x64-964aae3f`

test.group('OpenClaw shared compile cache', (group) => {
  let root: string
  let shared: string
  group.each.setup(async () => {
    root = await mkdtemp(join(tmpdir(), 'compile-cache-'))
    shared = sharedCacheDir(join(root, 'runtime', 'compile-cache'), '2026.9.6')
    // The layout a warm-up gateway leaves: the launcher's folder and one Node made directly.
    for (const folder of [
      join('openclaw', '2026.9.6', '1795665617640-142802', `${tag}-${warmedBy}`),
      `${tag}-${warmedBy}`,
    ]) {
      await mkdir(join(shared, 'node-compile-cache', folder, 'c5596213'), { recursive: true })
      await writeFile(join(shared, 'node-compile-cache', folder, 'c5596213', 'entry'), 'code cache')
    }
    return () => rm(root, { recursive: true, force: true })
  })

  test('keyed by framework and Node.js version', ({ assert }) => {
    assert.equal(
      sharedCacheDir('/cache', '2026.9.6'),
      `/cache/openclaw@2026.9.6/node${process.versions.node}`
    )
  })

  test("an agent's TMPDIR links each of Node's folders to the shared one, named for its uid", async ({
    assert,
  }) => {
    const agentTmp = join(root, 'agent', 'tmp')
    await mkdir(agentTmp, { recursive: true })
    assert.isTrue(
      await seedCompileCache(shared, { root: join(root, 'agent'), tmp: agentTmp }, 1_234_567)
    )
    const launcher = join(
      agentTmp,
      'node-compile-cache',
      'openclaw',
      '2026.9.6',
      '1795665617640-142802',
      `${tag}-1234567`,
      'c5596213',
      'entry'
    )
    assert.equal(await readFile(launcher, 'utf8'), 'code cache')
    assert.isTrue(existsSync(join(agentTmp, 'node-compile-cache', `${tag}-1234567`, 'c5596213')))
    assert.isFalse(existsSync(join(agentTmp, 'node-compile-cache', `${tag}-${warmedBy}`)))
    // Links into the shared (read-only to agents) folders, not copies: nothing per agent to write.
    const link = join(
      agentTmp,
      'node-compile-cache',
      'openclaw',
      '2026.9.6',
      '1795665617640-142802',
      `${tag}-1234567`
    )
    const info = await lstat(link)
    assert.isTrue(info.isSymbolicLink())
    assert.equal(
      await readlink(link),
      join(
        shared,
        'node-compile-cache',
        'openclaw',
        '2026.9.6',
        '1795665617640-142802',
        `${tag}-${warmedBy}`
      )
    )
    // A second start keeps what is there.
    assert.isFalse(
      await seedCompileCache(shared, { root: join(root, 'agent'), tmp: agentTmp }, 1_234_567)
    )
  })

  test('an agent with a cache of its own keeps it', async ({ assert }) => {
    const agentTmp = join(root, 'agent', 'tmp')
    const own = join(agentTmp, 'node-compile-cache', 'openclaw', 'mine')
    await mkdir(own, { recursive: true })
    assert.isFalse(
      await seedCompileCache(shared, { root: join(root, 'agent'), tmp: agentTmp }, 1_234_567)
    )
    assert.isFalse(existsSync(join(agentTmp, 'node-compile-cache', `${tag}-1234567`)))
  })

  test('a link the agent put in its TMPDIR is never followed: nothing is made where it points', async ({
    assert,
  }) => {
    const agentTmp = join(root, 'agent', 'tmp')
    await mkdir(agentTmp, { recursive: true })
    const elsewhere = join(root, 'elsewhere')
    await mkdir(elsewhere)
    await symlink(elsewhere, join(agentTmp, 'node-compile-cache'))
    assert.isFalse(
      await seedCompileCache(shared, { root: join(root, 'agent'), tmp: agentTmp }, 1_234_567)
    )
    assert.deepEqual(await readdir(elsewhere), [], 'nothing written through the link')
  })
})
