import { execFileSync, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import {
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  realpath,
  rm,
  writeFile,
} from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { test } from '@japa/runner'
import { PythonPackageCache } from '#runtime/python_cache'
import { waitFor } from '#tests/helpers/runtime'

const INSTALLER = new URL('../../fixtures/python_cache/install.ts', import.meta.url).pathname

/**
 * The runtime cache of Python frameworks against the real PyPI index (a
 * small pinned package): one install shared by concurrent callers, built
 * in a folder of its own and published by renaming a symlink onto the
 * environment's name, an install killed mid-way leaving nothing used,
 * unpinned requirements refused, and a failed install leaving nothing.
 */
test.group('Runtime / Python package cache', (group) => {
  let cacheDir: string
  group.setup(async () => {
    cacheDir = await mkdtemp(join(tmpdir(), 'python-cache-'))
    return () => rm(cacheDir, { recursive: true, force: true })
  })

  test('installs once for concurrent callers; the venv runs the package', async ({ assert }) => {
    const log: string[] = []
    const cache = new PythonPackageCache({ cacheDir, log: (line) => log.push(line) })
    const [first, second] = await Promise.all([
      cache.ensure('six-env', ['six==1.17.0']),
      cache.ensure('six-env', ['six==1.17.0']),
    ])
    assert.equal(first.venvDir, second.venvDir)
    // Built in a folder of its own, published as a symlink named after the environment.
    assert.match(basename(first.venvDir), /^six-env\.build-/)
    assert.equal(await readlink(cache.location('six-env').link), basename(first.venvDir))
    assert.equal(log.filter((line) => line.includes('not in the runtime cache')).length, 1)
    const version = execFileSync(
      join(first.venvDir, 'bin', 'python'),
      ['-c', 'import six; print(six.__version__)'],
      { encoding: 'utf8' }
    )
    assert.equal(version.trim(), '1.17.0')
    const marker = JSON.parse(await readFile(join(first.venvDir, '.installed'), 'utf8'))
    assert.deepEqual(marker.requirements, ['six==1.17.0'])
    assert.isTrue(await cache.isInstalled('six-env', ['six==1.17.0']))
    assert.isFalse(await cache.isInstalled('six-env', ['six==1.16.0']), 'other requirements')
  }).timeout(180_000)

  test('an install killed mid-way leaves nothing used; the next one replaces its remains', async ({
    assert,
  }) => {
    const cache = new PythonPackageCache({ cacheDir })
    const { link } = cache.location('killed-env')
    // The holder and its pip, in a process group of their own, killed together (as a crash would).
    const child = spawn(
      process.execPath,
      ['--import=@poppinss/ts-exec', INSTALLER, cacheDir, 'six==1.17.0'],
      { detached: true, stdio: 'ignore' }
    )
    const builds = async () => {
      const entries = await readdir(join(cacheDir, 'python'))
      return entries.filter((entry) => entry.startsWith('killed-env.build-'))
    }
    await waitFor(
      'the venv of the install to be made',
      async () => {
        for (const build of await builds().catch(() => [])) {
          if (existsSync(join(cacheDir, 'python', build, 'bin', 'python'))) return true
        }
        return false
      },
      60_000
    )
    process.kill(-child.pid!, 'SIGKILL')
    const [interrupted] = await builds()
    assert.isFalse(existsSync(link), 'nothing published')
    assert.isFalse(await cache.isInstalled('killed-env', ['six==1.17.0']))

    const log: string[] = []
    const { venvDir } = await new PythonPackageCache({
      cacheDir,
      timeoutMs: 120_000,
      log: (line) => log.push(line),
    }).ensure('killed-env', ['six==1.17.0'])
    assert.isFalse(existsSync(join(cacheDir, 'python', interrupted)), 'its remains removed')
    assert.notEqual(basename(venvDir), interrupted)
    assert.equal(await readlink(link), basename(venvDir), 'the link names the new build')
    assert.isTrue(existsSync(join(link, '.installed')))
    assert.include(log.join('\n'), `removed ${interrupted}`)
  }).timeout(180_000)

  test('an environment of the earlier in-place layout without its marker is replaced by a link', async ({
    assert,
  }) => {
    const cache = new PythonPackageCache({ cacheDir })
    const { link } = cache.location('in-place-env')
    await mkdir(join(link, 'bin'), { recursive: true })
    await writeFile(join(link, 'half-written'), 'x')
    const { venvDir } = await cache.ensure('in-place-env', ['six==1.17.0'])
    const published = await lstat(link)
    assert.isTrue(published.isSymbolicLink())
    assert.equal(await realpath(link), venvDir)
    assert.isFalse(existsSync(join(link, 'half-written')))
  }).timeout(180_000)

  test('unpinned requirements are refused; a failed install leaves no environment', async ({
    assert,
  }) => {
    const cache = new PythonPackageCache({ cacheDir })
    assert.throws(() => cache.ensure('loose-env', ['six>=1']), /pinned/)
    await assert.rejects(
      () => cache.ensure('missing-env', ['agent-host-no-such-package-xyz==0.0.1']),
      /pip install failed|No matching distribution|failed \(exit/
    )
    assert.isFalse(existsSync(cache.location('missing-env').link))
    const entries = await readdir(join(cacheDir, 'python'))
    const left = entries.filter((entry) => entry.startsWith('missing-env'))
    assert.deepEqual(left, [], 'no build folder left')
  }).timeout(180_000)
})
