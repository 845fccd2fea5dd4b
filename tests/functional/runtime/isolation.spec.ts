import { randomUUID } from 'node:crypto'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from '@japa/runner'
import app from '@adonisjs/core/services/app'
import { storageDir } from '#core/bootstrap/paths'
import { agentPaths } from '#runtime/agent_paths'
import { agentUid, bubblewrapWorks } from '#runtime/process/sandbox'
import {
  agentShell,
  fixtureSpec,
  processHarness,
  type RuntimeHarness,
} from '#tests/helpers/runtime'

const asRoot = process.getuid?.() === 0

test.group(
  'Isolation: an agent cannot reach other tenants or the service (process driver)',
  (group) => {
    let harness: RuntimeHarness
    group.each.setup(async () => {
      harness = await processHarness()
      return () => harness.cleanup()
    })

    const shell = (agentId: string, cmd: string) => agentShell(harness, agentId, cmd)

    test("an agent's shell runs as its own user and cannot read another agent's files, APP_KEY or the service's checkout", async ({
      assert,
    }) => {
      const mine = randomUUID()
      const theirs = randomUUID()
      await harness.runtime.ensureStarted(fixtureSpec(mine), { waitReady: true })
      await harness.runtime.ensureStarted(fixtureSpec(theirs), { waitReady: true })
      const secretFile = join(agentPaths(harness.agentsDir, theirs).workspace, 'secret.txt')
      await writeFile(secretFile, "the other tenant's secret")
      const appKeyFile = join(storageDir(app.appRoot), 'app_key')

      const id = await shell(mine, 'id -u')
      assert.equal(id.code, 0)
      assert.equal(Number(id.stdout.trim()), agentUid(mine), 'its own uid, not root')

      const other = await shell(mine, `cat ${secretFile}`)
      assert.notEqual(other.code, 0)
      assert.notInclude(other.stdout, 'secret')
      const key = await shell(mine, `cat ${appKeyFile}`)
      assert.notEqual(key.code, 0)
      assert.equal(key.stdout, '')
      // Only the read-only framework runtime and Node.js binary are mounted from the checkout.
      const checkout = await shell(mine, `ls ${app.appRoot.pathname}`)
      assert.notInclude(checkout.stdout, 'package.json')
      const storage = await shell(mine, `ls ${storageDir(app.appRoot)}`)
      assert.notInclude(storage.stdout, 'app_key', 'the service storage shows only the runtime')

      // Its own workspace works.
      const own = await shell(mine, 'echo mine > own.txt && cat own.txt')
      assert.equal(own.stdout.trim(), 'mine')
    })
      .timeout(60_000)
      .skip(!asRoot || !bubblewrapWorks(), 'needs root and bubblewrap (apt-get install bubblewrap)')

    test('the process count is capped per agent', async ({ assert }) => {
      const agentId = randomUUID()
      await harness.runtime.ensureStarted(fixtureSpec(agentId), { waitReady: true })
      const limits = await shell(agentId, 'cat /proc/self/limits')
      assert.match(limits.stdout, /Max processes\s+64\s+64/, 'the fixture pids limit')
    })
      .timeout(60_000)
      .skip(!asRoot, 'needs root (per-agent uids)')

    test('the agent has no privileges and no io_uring', async ({ assert }) => {
      const agentId = randomUUID()
      await harness.runtime.ensureStarted(fixtureSpec(agentId), { waitReady: true })
      const status = await shell(agentId, 'cat /proc/self/status')
      assert.match(status.stdout, /^CapEff:\s+0+$/m, 'no effective capabilities')
      assert.match(status.stdout, /^CapBnd:\s+0+$/m, 'none to regain either')
      assert.match(status.stdout, /^NoNewPrivs:\s+1$/m)
      // io_uring_setup (425 on x86_64 and arm64) fails with ENOSYS (38) under the seccomp filter.
      const ring = await shell(
        agentId,
        `python3 -c 'import ctypes; libc = ctypes.CDLL(None, use_errno=True); ` +
          `print(libc.syscall(425, 1, ctypes.create_string_buffer(120)), ctypes.get_errno())'`
      )
      assert.equal(ring.stdout.trim(), '-1 38', ring.stderr)
    })
      .timeout(60_000)
      .skip(
        !asRoot || !bubblewrapWorks() || !['x64', 'arm64'].includes(process.arch),
        'needs root and bubblewrap on x86_64 or arm64'
      )
  }
)
