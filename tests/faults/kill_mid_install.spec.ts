import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { PackageCache } from '#runtime/package_cache'
import { waitFor } from '#tests/helpers/processes'

/**
 * The story of the issue: the service is killed while it installs a
 * framework package. The next install must neither wait for the dead
 * one's lock (it used to block for 15 minutes) nor use half an install.
 */
const INSTALLER = new URL('../fixtures/install_lock/install_package.ts', import.meta.url).pathname
const PACKAGE = { name: 'is-number', version: '7.0.0' }

test.group('Fault: killed (-9) in the middle of a framework install', () => {
  test('the next install takes over at once and never uses the half install', async ({
    assert,
  }) => {
    const cacheDir = mkdtempSync(join(tmpdir(), 'install-kill-'))
    try {
      let output = ''
      const installer = spawn(
        process.execPath,
        ['--import', '@poppinss/ts-exec', INSTALLER, cacheDir, PACKAGE.name, PACKAGE.version],
        { cwd: process.cwd(), stdio: ['ignore', 'pipe', 'pipe'] }
      )
      installer.stdout!.on('data', (chunk) => (output += chunk))
      installer.stderr!.on('data', (chunk) => (output += chunk))
      // Killed once it holds the lock and npm is at work.
      await waitFor(
        async () => (output.includes('installing from the npm registry') ? true : undefined),
        {
          timeoutMs: 60_000,
          what: `the installer to start npm:\n${output}`,
        }
      )
      installer.kill('SIGKILL')
      await once(installer, 'exit')
      const npmRoot = join(cacheDir, 'npm')
      assert.isTrue(
        readdirSync(npmRoot).some((entry) => entry.endsWith('.lock')),
        'the dead installer left its lock behind'
      )

      const messages: string[] = []
      const cache = new PackageCache({ cacheDir, log: (message) => messages.push(message) })
      const started = Date.now()
      const { packageDir } = await cache.ensure(PACKAGE.name, PACKAGE.version)
      const tookMs = Date.now() - started
      console.log(
        `    install after a kill -9 mid-install: done in ${tookMs} ms (lock expiry 120 s)`
      )
      assert.isTrue(
        messages.some((message) => message.includes('took over the install lock')),
        messages.join('\n')
      )
      assert.isBelow(tookMs, 60_000, 'not left waiting for the dead holder’s lock to expire')
      const manifest = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8'))
      assert.equal(manifest.version, PACKAGE.version)
      assert.isTrue(
        existsSync(join(cacheDir, 'npm', `${PACKAGE.name}@${PACKAGE.version}`, '.installed'))
      )
      assert.deepEqual(
        readdirSync(npmRoot).filter((entry) => entry.includes('.tmp-') || entry.endsWith('.lock')),
        [],
        'no staging folder or lock is left behind'
      )
    } finally {
      rmSync(cacheDir, { recursive: true, force: true })
    }
  }).timeout(180_000)
})
