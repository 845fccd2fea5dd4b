import { test } from '@japa/runner'
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { once } from 'node:events'
import {
  acquireInstallLock,
  INSTANCE_ID,
  processStartTime,
  type LockOwner,
} from '#runtime/install_lock'

const HOLDER = new URL('../../fixtures/install_lock/hold_lock.ts', import.meta.url).pathname

async function lockPath() {
  const dir = await mkdtemp(join(tmpdir(), 'install-lock-'))
  return { dir, lock: join(dir, 'pkg@1.0.0.lock') }
}

async function writeOwner(lock: string, owner: LockOwner) {
  await mkdir(lock)
  await writeFile(join(lock, 'owner.json'), JSON.stringify(owner))
}

test.group('Install lock with owners', () => {
  test('records holder instance id, pid, start time and expiry; release removes it', async ({
    assert,
  }) => {
    const { dir, lock } = await lockPath()
    const held = await acquireInstallLock(lock, 'pkg', { ttlMs: 60_000 })
    const owner = JSON.parse(await readFile(join(lock, 'owner.json'), 'utf8')) as LockOwner
    assert.equal(owner.instanceId, INSTANCE_ID)
    assert.equal(owner.pid, process.pid)
    assert.equal(owner.startTime, processStartTime(process.pid))
    assert.isAbove(owner.expiresAt, Date.now())
    await held.release()
    assert.isFalse(existsSync(lock))
    await rm(dir, { recursive: true, force: true })
  })

  test('a holder killed with SIGKILL mid-install is taken over long before its expiry', async ({
    assert,
  }) => {
    const { dir, lock } = await lockPath()
    const child = spawn(process.execPath, ['--import=@poppinss/ts-exec', HOLDER, lock], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const [first] = await once(child.stdout!, 'data')
    assert.equal(String(first).trim(), 'held')
    const record = JSON.parse(await readFile(join(lock, 'owner.json'), 'utf8')) as LockOwner
    assert.equal(record.pid, child.pid)
    // Its record is valid for ten more minutes; only its death frees the lock.
    assert.isAbove(record.expiresAt, Date.now() + 5 * 60_000)

    child.kill('SIGKILL')
    await once(child, 'exit')
    const messages: string[] = []
    // A timeout far below the holder's expiry: waiting for the expiry would fail this.
    const held = await acquireInstallLock(lock, 'pkg', {
      timeoutMs: 20_000,
      log: (message) => messages.push(message),
    })
    assert.match(messages.join('\n'), /took over the install lock, holder pid \d+ is gone/)
    const owner = JSON.parse(await readFile(join(lock, 'owner.json'), 'utf8')) as LockOwner
    assert.equal(owner.pid, process.pid)
    await held.release()
    await rm(dir, { recursive: true, force: true })
  }).timeout(60_000)

  test('a pid reused by another process is not the holder', async ({ assert }) => {
    const { dir, lock } = await lockPath()
    await writeOwner(lock, {
      instanceId: 'other',
      host: hostname(),
      pid: process.pid,
      startTime: '1',
      expiresAt: Date.now() + 600_000,
    })
    const messages: string[] = []
    const held = await acquireInstallLock(lock, 'pkg', {
      timeoutMs: 5_000,
      log: (message) => messages.push(message),
    })
    assert.match(messages.join('\n'), /reused by another process/)
    await held.release()
    await rm(dir, { recursive: true, force: true })
  })

  test('a live holder is waited for, and taken over once its record expires', async ({
    assert,
  }) => {
    const { dir, lock } = await lockPath()
    const live: LockOwner = {
      instanceId: 'other',
      host: 'another-host',
      pid: 1,
      startTime: null,
      expiresAt: Date.now() + 600_000,
    }
    await writeOwner(lock, live)
    await assert.rejects(
      () => acquireInstallLock(lock, 'pkg', { timeoutMs: 1_000, pollMs: 100 }),
      /timed out waiting for the install lock/
    )
    await writeFile(
      join(lock, 'owner.json'),
      JSON.stringify({ ...live, expiresAt: Date.now() - 1 })
    )
    const messages: string[] = []
    const held = await acquireInstallLock(lock, 'pkg', {
      timeoutMs: 5_000,
      log: (message) => messages.push(message),
    })
    assert.match(messages.join('\n'), /holder record expired/)
    await held.release()
    await rm(dir, { recursive: true, force: true })
  })
})
