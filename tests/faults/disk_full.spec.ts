import { execFileSync } from 'node:child_process'
import {
  closeSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { waitFor } from '#tests/helpers/processes'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'

/** A small tmpfs to be the service's storage/: mounting needs root. */
function mountSmallDisk(): string | undefined {
  const dir = mkdtempSync(join(tmpdir(), 'small-disk-'))
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=48m,mode=0755', 'tmpfs', dir], {
      stdio: 'ignore',
    })
    return dir
  } catch {
    rmSync(dir, { recursive: true, force: true })
    return undefined
  }
}

/** Writes until the file system says ENOSPC. */
function fillUp(path: string) {
  const fd = openSync(path, 'w')
  const chunk = Buffer.alloc(1024 * 1024, 1)
  try {
    for (;;) writeSync(fd, chunk)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error
  } finally {
    closeSync(fd)
  }
}

const disk = process.getuid?.() === 0 ? mountSmallDisk() : undefined

test.group('Fault: the disk under storage/ is full', (group) => {
  let service: ServiceUnderFault

  group.setup(async () => {
    if (!disk) return () => {}
    // Agents sleep after 2 s idle: the test fills the disk under a sleeping agent.
    service = await startServiceUnderFault({ STORAGE_DIR: disk, AGENT_IDLE_SLEEP_SECS: '2' })
    return async () => {
      await service.destroy().catch(() => {})
      // Lazy: an agent process of the killed service may still hold it open.
      execFileSync('umount', ['-l', disk])
      rmSync(disk, { recursive: true, force: true })
    }
  })

  test('writes fail with a clear 503, reads keep being served, nothing is half written, and writes work again once there is room', async ({
    assert,
  }) => {
    const token = await service.signUp()
    const agentId = await service.createFixtureAgent(token, 'Disk agent')
    const write = (path: string, content: string) =>
      service.call(`/agents/${agentId}/container-files`, {
        method: 'PUT',
        token,
        json: { path, content },
      })
    const writeStatus = async (path: string, content: string) => {
      const answer = await write(path, content)
      return answer.status
    }
    await waitFor(
      async () => ((await writeStatus('before.txt', 'kept')) === 200 ? true : undefined),
      { timeoutMs: 60_000, what: 'the agent to take files' }
    )

    // Asleep, the agent has no process that a full disk could make crash
    // (a crashed agent rightly answers 409 AGENT_NOT_RUNNING): its files
    // are written straight to its folders, which is what this test is about.
    await waitFor(
      async () => {
        const status = await service.call(`/agents/${agentId}/status`, { token })
        return status.body.data?.container === 'sleeping' ? true : undefined
      },
      { timeoutMs: 30_000, what: 'the agent to fall asleep' }
    )
    // Asleep from its dump on; its checkpoint is stored after, and storing it frees the raw
    // dump's room: the disk is filled once that is done.
    const log = join(disk!, 'agents', '.runtime', agentId, 'output.log')
    await waitFor(
      async () => {
        const text = readFileSync(log, 'utf8')
        return !text.includes('asleep: dumped') || text.includes('asleep: checkpointed')
          ? true
          : undefined
      },
      { timeoutMs: 30_000, what: 'its checkpoint to be stored' }
    )

    const filler = join(disk!, 'filler')
    fillUp(filler)
    const refused = await write('during.txt', 'x'.repeat(64 * 1024))
    assert.equal(refused.status, 503, JSON.stringify(refused.body))
    assert.equal(refused.body.code, 'SERVER_ERROR')
    assert.match(refused.body.error, /storage is full/)

    const health = await service.call('/health')
    assert.equal(health.status, 200)
    const listed = await service.call('/agents', { token })
    assert.equal(listed.status, 200)
    const detail = await service.call(`/agents/${agentId}`, { token })
    assert.equal(detail.status, 200, 'the agent is still served')
    // On disk.
    const workspace = join(disk!, 'agents', agentId, 'workspace')
    assert.equal(
      readFileSync(join(workspace, 'before.txt'), 'utf8'),
      'kept',
      'earlier files intact'
    )
    assert.deepEqual(
      readdirSync(workspace).filter(
        (name) => name.startsWith('during') || name.endsWith('.partial')
      ),
      [],
      'no half-written file is left behind'
    )

    rmSync(filler)
    // Writes to storage work again: a sign-up writes its verification mail there.
    await service.signUp()
    const unhandled = service.server
      .output()
      .split('\n')
      .filter((line) => line.includes('"unhandled error"'))
    assert.lengthOf(unhandled, 0, unhandled.join('\n').slice(0, 1500))
    await service.call(`/agents/${agentId}/stop`, { method: 'POST', token })
  })
    .timeout(180_000)
    .skip(!disk, 'mounting a tmpfs needs root')
})
