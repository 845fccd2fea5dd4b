import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { PythonPackageCache } from '#runtime/python_cache'

/**
 * The runtime cache of Python frameworks against the real PyPI index (a
 * small pinned package): one install shared by concurrent callers, the
 * marker written last, the remains of an interrupted install replaced,
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

  test('the remains of an interrupted install are replaced', async ({ assert }) => {
    const cache = new PythonPackageCache({ cacheDir })
    const { venvDir } = cache.location('interrupted-env')
    await mkdir(join(venvDir, 'bin'), { recursive: true })
    await writeFile(join(venvDir, 'half-written'), 'x')
    await cache.ensure('interrupted-env', ['six==1.17.0'])
    assert.isFalse(existsSync(join(venvDir, 'half-written')))
    assert.isTrue(existsSync(join(venvDir, '.installed')))
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
    assert.isFalse(existsSync(cache.location('missing-env').venvDir))
  }).timeout(180_000)
})
