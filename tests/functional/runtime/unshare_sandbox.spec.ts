import { spawnSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { chown, copyFile, chmod, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises'
import { existsSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import app from '@adonisjs/core/services/app'
import { storageDir } from '#core/bootstrap/paths'
import { agentPaths } from '#runtime/agent_paths'
import { agentUid } from '#runtime/process/sandbox'
import { unshareSandboxAvailability } from '#runtime/process/unshare_sandbox'
import {
  agentShell,
  fixtureSpec,
  processHarness,
  type RuntimeHarness,
} from '#tests/helpers/runtime'

const asRoot = process.getuid?.() === 0
const canUnshare = asRoot && unshareSandboxAvailability(true).works
const NODE = process.execPath
/** io_uring_setup(1, params) through ctypes: prints its result and errno. */
const IO_URING_SETUP =
  `python3 -c 'import ctypes; libc = ctypes.CDLL(None, use_errno=True); ` +
  `print(libc.syscall(425, 1, ctypes.create_string_buffer(120)), ctypes.get_errno())'`

test.group('Sandbox: AGENT_SANDBOX=unshare (util-linux, no bubblewrap)', (group) => {
  let harness: RuntimeHarness
  const warnings: string[] = []
  group.each.setup(async () => {
    warnings.length = 0
    harness = await processHarness({ sandbox: 'unshare', warn: (text) => warnings.push(text) })
    return () => harness.cleanup()
  })
  const shell = (agentId: string, cmd: string) => agentShell(harness, agentId, cmd)

  test('its own uid, no capabilities, no new privileges, no io_uring, setuid files do not elevate', async ({
    assert,
  }) => {
    const agentId = randomUUID()
    await harness.runtime.ensureStarted(fixtureSpec(agentId), { waitReady: true })

    const status = await shell(agentId, 'cat /proc/self/status')
    assert.equal(status.code, 0, status.stderr)
    assert.match(status.stdout, new RegExp(`^Uid:\\s+${agentUid(agentId)}\\s`, 'm'))
    assert.match(status.stdout, new RegExp(`^Gid:\\s+${agentUid(agentId)}\\s`, 'm'))
    assert.match(status.stdout, /^Groups:\s*$/m, 'no supplementary groups')
    for (const set of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) {
      assert.match(status.stdout, new RegExp(`^${set}:\\s+0+$`, 'm'), `${set} empty`)
    }
    assert.match(status.stdout, /^NoNewPrivs:\s+1$/m)

    // The host can make a ring (root, CAP_SYS_ADMIN); the agent cannot: ENOSYS (38) from
    // the seccomp filter, or EPERM (1) under kernel.io_uring_disabled=1.
    const onHost = spawnSync('/bin/sh', ['-c', IO_URING_SETUP], { encoding: 'utf8' })
    assert.match(onHost.stdout.trim(), /^\d+ 0$/, `io_uring works on the host: ${onHost.stderr}`)
    const ring = await shell(agentId, IO_URING_SETUP)
    assert.oneOf(ring.stdout.trim(), ['-1 38', '-1 1'], ring.stderr)

    // A setuid-root copy of id(1): it elevates on the host, not in the sandbox (nosuid, no new privileges).
    const workspace = agentPaths(harness.agentsDir, agentId).workspace
    const setuidId = join(workspace, 'setuid-id')
    await copyFile('/usr/bin/id', setuidId)
    await chown(setuidId, 0, 0)
    await chmod(setuidId, 0o4755)
    const hostRun = spawnSync('/usr/bin/setpriv', [
      ...['--reuid=65534', '--regid=65534', '--clear-groups', setuidId, '-u'],
    ])
    assert.equal(hostRun.stdout.toString().trim(), '0', 'the copy elevates to root on the host')
    const inside = await shell(agentId, './setuid-id -u')
    assert.equal(inside.code, 0, inside.stderr)
    assert.equal(inside.stdout.trim(), String(agentUid(agentId)))
    assert.equal((statSync('/usr/bin/su').mode & 0o4000) !== 0, true, 'su is setuid on the host')
    const mounts = await shell(agentId, 'cat /proc/self/mounts')
    assert.match(mounts.stdout, /^\S+ \/usr \S+ ro,nosuid,nodev/m)
  })
    .timeout(60_000)
    .skip(!canUnshare, 'needs root and util-linux unshare')

  test("its /proc shows only its own processes; other agents' files, APP_KEY and the checkout are out of reach; its workspace works", async ({
    assert,
  }) => {
    const mine = randomUUID()
    const theirs = randomUUID()
    await harness.runtime.ensureStarted(fixtureSpec(mine), { waitReady: true })
    await harness.runtime.ensureStarted(fixtureSpec(theirs), { waitReady: true })

    const procEntries = await readdir('/proc')
    const hostPids = procEntries.filter((name) => /^\d+$/.test(name))
    assert.isAbove(hostPids.length, 20, 'the host runs many processes')
    const listed = await shell(mine, "ls /proc | grep -E '^[0-9]+$'")
    const pids = listed.stdout.trim().split('\n')
    // Its init, the framework, the shell and ls (and grep).
    assert.isAtMost(pids.length, 6, listed.stdout)
    const cmdlines = await shell(mine, 'cat /proc/[0-9]*/cmdline | tr "\\0" " "')
    assert.include(cmdlines.stdout, 'fixture-server.mjs', 'its own framework is listed')
    assert.notInclude(cmdlines.stdout, process.argv.slice(1).join(' '), 'the test runner is not')
    assert.notInclude(cmdlines.stdout, theirs, "the other agent's processes are not visible")

    const secretFile = join(agentPaths(harness.agentsDir, theirs).workspace, 'secret.txt')
    await writeFile(secretFile, "the other tenant's secret")
    const other = await shell(mine, `cat ${secretFile}`)
    assert.notEqual(other.code, 0)
    assert.notInclude(other.stdout, 'secret')
    const appKeyFile = join(storageDir(app.appRoot), 'app_key')
    assert.isTrue(existsSync(appKeyFile), 'the service has an app_key')
    const key = await shell(mine, `cat ${appKeyFile}`)
    assert.notEqual(key.code, 0)
    assert.equal(key.stdout, '')
    const checkout = await shell(mine, `ls ${app.appRoot.pathname}`)
    assert.notInclude(checkout.stdout, 'package.json')

    const own = await shell(
      mine,
      'echo mine > own.txt && cat own.txt && echo t > $TMPDIR/t && ls /tmp'
    )
    assert.equal(own.code, 0, own.stderr)
    assert.equal(own.stdout.split('\n')[0], 'mine')
    const pty = await shell(
      mine,
      `python3 -c 'import os, pty; m, s = pty.openpty(); print(os.ttyname(s))'`
    )
    assert.equal(pty.stdout.trim(), '/dev/pts/0', `a pseudo-terminal of its own: ${pty.stderr}`)
    const root = await shell(mine, 'touch /etc/x; echo $?; touch /usr/x; echo $?')
    assert.deepEqual(root.stdout.trim().split('\n'), ['1', '1'], 'root and /usr are read-only')
  })
    .timeout(60_000)
    .skip(!canUnshare, 'needs root and util-linux unshare')

  test('the gateway answers, and stops gracefully on SIGTERM (passed on by the namespace init)', async ({
    assert,
  }) => {
    const agentId = randomUUID()
    const started = await harness.runtime.ensureStarted(fixtureSpec(agentId), { waitReady: true })
    const health = await fetch(`${started.baseUrl}/health`)
    assert.equal(health.status, 200)
    await harness.runtime.stop(agentId)
    const logs = await harness.runtime.logs(agentId)
    assert.include(logs, 'received SIGTERM, shutting down')
    assert.notInclude(logs, 'SIGKILL')
    const after = await harness.runtime.status(agentId)
    assert.equal(after.state, 'stopped')
    // Nothing of it is left: no process carries its marker.
    const marked = spawnSync('/bin/sh', ['-c', `grep -l ${agentId} /proc/[0-9]*/environ`])
    assert.equal(marked.stdout.toString().trim(), '')
    assert.isEmpty(warnings.filter((text) => text.includes('WITHOUT')))
  })
    .timeout(60_000)
    .skip(!canUnshare, 'needs root and util-linux unshare')
})

test.group('Sandbox: AGENT_SANDBOX=none and a mode the host cannot give', () => {
  test('none runs the agent unsandboxed, on purpose, with a loud warning', async ({ assert }) => {
    const warnings: string[] = []
    const harness = await processHarness({ sandbox: 'none', warn: (text) => warnings.push(text) })
    try {
      const agentId = randomUUID()
      await harness.runtime.ensureStarted(fixtureSpec(agentId), { waitReady: true })
      const status = await agentShell(harness, agentId, 'cat /proc/self/status; ls /proc | wc -l')
      assert.match(status.stdout, /^NoNewPrivs:\s+0$/m, 'no sandbox')
      assert.notMatch(status.stdout, /^CapBnd:\s+0+$/m)
      const processes = Number(status.stdout.trim().split('\n').at(-1))
      assert.isAbove(processes, 20, 'it sees the host processes')
      assert.lengthOf(warnings, 1)
      assert.include(warnings[0], 'AGENT_SANDBOX=none: agents run WITHOUT a sandbox')
    } finally {
      await harness.cleanup()
    }
  }).timeout(60_000)

  test('an impossible mode refuses to start agents with a clear error in their log', async ({
    assert,
  }) => {
    // A service that is not root cannot make the unshare sandbox.
    const scratch = await mkdtemp(join(tmpdir(), 'agent-host-refused-'))
    try {
      await chown(scratch, 65534, 65534)
      const run = spawnSync(
        '/usr/bin/setpriv',
        [
          ...['--reuid=65534', '--regid=65534', '--clear-groups'],
          ...[NODE, '--import=@poppinss/ts-exec', 'tests/fixtures/sandbox/start_refused.ts'],
          ...['unshare', scratch],
        ],
        { cwd: app.appRoot.pathname, encoding: 'utf8', env: { ...process.env, HOME: scratch } }
      )
      const result = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}') as {
        uid: number
        error?: string
        errors: string[]
        logs: string
      }
      assert.equal(result.uid, 65534, run.stderr)
      const message =
        'Agents cannot start: AGENT_SANDBOX=unshare, but the unshare sandbox cannot be made: the service does not run as root. Set AGENT_SANDBOX=none only to run agents without a sandbox on purpose'
      assert.equal(result.error, `ServiceUnavailableException: ${message}`)
      assert.deepEqual(result.errors, [message], 'the agent goes to error with it')
      assert.include(result.logs, message, 'its owner reads it in the agent log')
    } finally {
      await rm(scratch, { recursive: true, force: true })
    }
  })
    .timeout(60_000)
    .skip(!asRoot, 'needs root (to run the service as another user)')
})
