import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { test } from '@japa/runner'
import { promoteWhileRunning } from '#backups/services/archive_packer'
import { waitFor } from '#tests/helpers/processes'

/** A thread's scheduling policy (0 SCHED_OTHER, 5 SCHED_IDLE) and niceness, from /proc. */
function scheduling(pid: number) {
  const sched = readFileSync(`/proc/${pid}/sched`, 'utf8')
  const policy = Number(/^policy\s*:\s*(\d+)/m.exec(sched)?.[1])
  const niceness = Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[16])
  return { policy, niceness }
}

/**
 * A background packer starts at SCHED_IDLE, which a host kept busy starves
 * for ever (archive_packer.ts): while it runs it steps up, so a backup on a
 * busy host ends late but ends.
 */
test.group('Backups: a starved packer steps up', () => {
  test('SCHED_IDLE becomes SCHED_OTHER at the next niceness, then the next')
    .skip(!existsSync('/usr/bin/chrt'), 'no chrt')
    .run(async ({ assert, cleanup }) => {
      const child = spawn('/usr/bin/chrt', [
        '--idle',
        '0',
        '/usr/bin/nice',
        '-n',
        '19',
        'sleep',
        '30',
      ])
      cleanup(() => void child.kill('SIGKILL'))
      const pid = child.pid!
      await waitFor(
        async () => (/sleep/.test(readFileSync(`/proc/${pid}/comm`, 'utf8')) ? true : undefined),
        {
          timeoutMs: 5_000,
          what: 'sleep to run',
        }
      )
      assert.deepEqual(scheduling(pid), { policy: 5, niceness: 19 })

      const stop = promoteWhileRunning(pid, [
        { afterMs: 100, niceness: 15 },
        { afterMs: 400, niceness: 10 },
      ])
      cleanup(stop)
      await waitFor(async () => (scheduling(pid).niceness === 15 ? true : undefined), {
        timeoutMs: 5_000,
        what: 'the first step',
      })
      assert.equal(scheduling(pid).policy, 0)
      await waitFor(async () => (scheduling(pid).niceness === 10 ? true : undefined), {
        timeoutMs: 5_000,
        what: 'the second step',
      })
    })
})
