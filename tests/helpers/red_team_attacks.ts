/**
 * Red team (issue 25, docs/security.md "Red team"): a real OpenClaw agent,
 * driven by a stand-in model, runs each attack through its own `exec` tool
 * on every sandbox mode this host supports. Each test first proves the
 * attack could succeed here (the canary is readable by root, the target
 * answers from the host, ...), then fails exactly when the attack worked.
 * One agent per mode runs every attack; the outcomes make the table printed
 * at the end of the suite (storage/redteam-report.md).
 *
 * The attacks, and the group of tests of one mode (redTeamGroup): each mode
 * has its spec file in tests/redteam/, so the parallel runner can run the
 * modes in different shards (only the docker one shares the Docker engine).
 */
import { spawnSync, type ChildProcess } from 'node:child_process'
import { readFileSync, rmSync } from 'node:fs'
import { lstat, mkdir, readdir, readFile, rename, rm, stat, unlink } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'
import { constants as osConstants, tmpdir } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { test } from '@japa/runner'
import {
  addPrivateAddress,
  answersFromHost,
  bashScript,
  gatewayOf,
  hostAddress,
  NO_SHELL,
  PRIVATE_ADDRESS,
  recordOutcome,
  removePrivateAddress,
  rootOnlyFile,
  SANDBOX_MODES,
  serviceFolderOf,
  setuidRootPrograms,
  startCountingListener,
  startMarkedHostProcess,
  startRange,
  type CountingListener,
  type Outcome,
  type RedTeamRange,
} from '#tests/helpers/red_team'
import type { RedTeamModeName } from '#tests/helpers/red_team_report'

/** The attack cannot be tried on this host (its target is not here); says why. */
class NotApplicable extends Error {}

/** The first error a command printed, as a short phrase. */
function refusal(output: string): string {
  const known: Array<[RegExp, string]> = [
    [/Read-only file system/i, 'EROFS'],
    [/Permission denied/i, 'EACCES'],
    [/Operation not permitted/i, 'EPERM'],
    [/Connection refused/i, 'ECONNREFUSED'],
    [/Network is unreachable/i, 'ENETUNREACH'],
    [/No route to host/i, 'EHOSTUNREACH'],
    // GNU timeout exits 124, BusyBox's 143 (its SIGTERM).
    [/probe-exit=(124|143)\b/, 'timeout'],
    [/Function not implemented/i, 'ENOSYS'],
    [NO_SHELL, 'no shell'],
    [/command not found/i, 'tool missing'],
    [/No such file or directory/i, 'ENOENT (not visible)'],
    [/Device or resource busy/i, 'EBUSY'],
  ]
  for (const [pattern, name] of known) if (pattern.test(output)) return name
  return output.replace(/\s+/g, ' ').trim().slice(0, 60) || 'no output'
}

const refused = (how: string): Outcome => ({ succeeded: false, how })
const succeeded = (how: string): Outcome => ({ succeeded: true, how })

// ---------------------------------------------------------------------------
// Link attacks: the agent plants links where the service reads or writes.

/**
 * Root undoes a swap of the agent's service folder (`<agents>/.runtime/<id>`):
 * what the agent made there goes, the moved folder comes back.
 */
async function restoreServiceFolder(range: RedTeamRange, existed: boolean) {
  const folder = serviceFolderOf(range, range.attacker.id)
  const moved = `${folder}.moved-by-agent`
  if (await lstat(moved).catch(() => undefined)) {
    await rm(folder, { recursive: true, force: true })
    await rename(moved, folder)
  } else if (!existed) {
    await rm(folder, { recursive: true, force: true })
  }
}

/** Root removes links the agent left in its workspace (the service renders them again). */
async function removeAgentLinks(range: RedTeamRange, names: string[]) {
  for (const name of names) {
    const path = join(range.attacker.folder, 'workspace', name)
    const info = await lstat(path).catch(() => undefined)
    if (info?.isSymbolicLink()) await unlink(path)
  }
}

async function existsAsRoot(path: string) {
  return (await lstat(path).catch(() => undefined)) !== undefined
}

/**
 * The agent's script that replaces the folder where the service keeps its
 * logs, records and credentials of the agent by a folder it owns; `fill`
 * runs inside the new folder.
 */
function swapServiceFolderScript(range: RedTeamRange, fill: string): string {
  const folder = serviceFolderOf(range, range.attacker.id)
  return [
    `cd ${dirname(folder)} || exit 1`,
    `if [ -e ${basename(folder)} ]; then mv ${basename(folder)} ${basename(folder)}.moved-by-agent || exit 1; fi`,
    `mkdir ${basename(folder)} || exit 1`,
    `cd ${basename(folder)} || exit 1`,
    fill,
    'echo PLANTED',
  ].join('\n')
}

async function runtimeLinkSwap(range: RedTeamRange): Promise<Outcome> {
  // Could succeed: root reads the canary, and the logs API answers from the log file.
  assert(range.canary.length >= 16, 'the APP_KEY canary is readable by root')
  const before = await range.call('GET', `/agents/${range.attacker.id}/logs?tail=5`)
  assert(before.status === 200, `the logs API answers (${before.status})`)
  const serviceFolder = serviceFolderOf(range, range.attacker.id)
  const existed = await existsAsRoot(serviceFolder)
  try {
    const output = await range.runInAgent(
      bashScript(
        swapServiceFolderScript(
          range,
          `for name in output.log output.log.1 process.json credentials.json; do ln -s ${range.canaryFile} $name || exit 1; done`
        )
      )
    )
    for (let attempt = 0; attempt < 5; attempt++) {
      const logs = await range.call('GET', `/agents/${range.attacker.id}/logs?tail=50`)
      if (logs.text.includes(range.canary) || logs.text.includes(range.canary.slice(0, 16))) {
        return succeeded('the logs API returned the APP_KEY')
      }
      await sleep(1_000)
    }
    return refused(output.includes('PLANTED') ? 'link not followed' : refusal(output))
  } finally {
    await restoreServiceFolder(range, existed)
  }
}

async function rotationThroughLink(range: RedTeamRange): Promise<Outcome> {
  const target = await rootOnlyFile(range, 'rotation-target')
  const original = await readFile(target, 'utf8')
  const serviceFolder = serviceFolderOf(range, range.attacker.id)
  const existed = await existsAsRoot(serviceFolder)
  const planted = join(serviceFolder, 'output.log')
  try {
    const output = await range.runInAgent(
      bashScript(
        swapServiceFolderScript(
          range,
          [
            // A log over the 5 MB cap, and its rotated file a link to the service's file.
            "head -c 6000000 /dev/zero | tr '\\0' R > output.log || exit 1",
            `ln -s ${target} output.log.1 || exit 1`,
          ].join('\n')
        )
      )
    )
    if (!output.includes('PLANTED')) return refused(refusal(output))
    // The supervisor checks the log's size every second: give it many chances.
    for (let attempt = 0; attempt < 15; attempt++) {
      if ((await readFile(target, 'utf8')) !== original) {
        return succeeded('rotation wrote the agent-chosen log into a root-only file')
      }
      await sleep(1_000)
    }
    const plantedInfo = await stat(planted).catch(() => undefined)
    const size = plantedInfo?.size
    return refused(
      size !== undefined && size < 6_000_000
        ? 'rotated, link not followed'
        : 'agent folder not used'
    )
  } finally {
    await restoreServiceFolder(range, existed)
  }
}

async function soulLinkAndRestart(range: RedTeamRange): Promise<Outcome> {
  const target = await rootOnlyFile(range, 'soul-target')
  const original = await readFile(target, 'utf8')
  try {
    const output = await range.runInAgent(
      bashScript(
        `cd ${range.attacker.workspace} || exit 1\nrm -f SOUL.md && ln -s ${target} SOUL.md && echo PLANTED`
      )
    )
    // Nothing planted, nothing to follow: the restart would prove nothing more.
    if (!output.includes('PLANTED')) return refused(refusal(output))
    const personality = `The owner's new personality ${Date.now()}.`
    const patched = await range.call('PATCH', `/agents/${range.attacker.id}`, {
      config: { personality },
    })
    assert(patched.status === 200, `the config change is accepted (${patched.status})`)
    const restarted = await range.call('POST', `/agents/${range.attacker.id}/restart`)
    assert(restarted.status < 300, `the restart is accepted (${restarted.status})`)
    await range.waitRunning(range.attacker.id)
    const after = await readFile(target, 'utf8')
    if (after !== original) return succeeded('the owner text was written as root through SOUL.md')
    return refused('link not followed')
  } finally {
    await removeAgentLinks(range, ['SOUL.md'])
  }
}

async function skillsLink(range: RedTeamRange): Promise<Outcome> {
  const targetDir = join(range.targetsDir, 'skills-target')
  await rm(targetDir, { recursive: true, force: true })
  await mkdir(targetDir, { mode: 0o700 })
  try {
    const output = await range.runInAgent(
      bashScript(
        `cd ${range.attacker.workspace} || exit 1\nrm -rf skills && ln -s ${targetDir} skills && echo PLANTED`
      )
    )
    const installed = await range.call('POST', `/agents/${range.attacker.id}/skills/install`, {
      skillId: 'translation',
    })
    assert(installed.status < 300, `the skill install is accepted (${installed.status})`)
    const written = await readdir(targetDir)
    if (written.length > 0) return succeeded(`the skill was written as root into ${targetDir}`)
    return refused(output.includes('PLANTED') ? 'link not followed' : refusal(output))
  } finally {
    await removeAgentLinks(range, ['skills'])
    await range.call('POST', `/agents/${range.attacker.id}/skills/uninstall`, {
      skillId: 'translation',
    })
  }
}

async function knowledgeLink(range: RedTeamRange): Promise<Outcome> {
  const target = await rootOnlyFile(range, 'knowledge-target')
  const original = await readFile(target, 'utf8')
  try {
    const output = await range.runInAgent(
      bashScript(
        `cd ${range.attacker.workspace} || exit 1\nrm -rf knowledge && mkdir knowledge && ln -s ${target} knowledge/red-team.txt && echo PLANTED`
      )
    )
    const uploaded = await range.call('POST', `/agents/${range.attacker.id}/knowledge`, {
      filename: 'red-team.txt',
      content: 'The owner knowledge.',
    })
    assert(uploaded.status < 300, `the knowledge upload is accepted (${uploaded.status})`)
    if ((await readFile(target, 'utf8')) !== original) {
      return succeeded('the knowledge file was written as root through the link')
    }
    return refused(output.includes('PLANTED') ? 'link not followed' : refusal(output))
  } finally {
    const link = join(range.attacker.folder, 'workspace', 'knowledge', 'red-team.txt')
    const linkInfo = await lstat(link).catch(() => undefined)
    if (linkInfo?.isSymbolicLink()) await unlink(link)
    await range.call('DELETE', `/agents/${range.attacker.id}/knowledge/red-team.txt`)
  }
}

async function filesApiThroughLink(range: RedTeamRange): Promise<Outcome> {
  const target = await rootOnlyFile(range, 'files-target')
  const original = await readFile(target, 'utf8')
  try {
    const output = await range.runInAgent(
      bashScript(
        `cd ${range.attacker.workspace} || exit 1\nln -sf ${range.canaryFile} leak.txt && ln -sf ${target} written.txt && echo PLANTED`
      )
    )
    const read = await range.call(
      'GET',
      `/agents/${range.attacker.id}/container-files/read?path=leak.txt`
    )
    if (read.text.includes(range.canary)) return succeeded('the files API read the APP_KEY')
    await range.call('PUT', `/agents/${range.attacker.id}/container-files`, {
      path: 'written.txt',
      content: 'The owner text.',
    })
    if ((await readFile(target, 'utf8')) !== original) {
      return succeeded('the files API wrote as root through the link')
    }
    return refused(
      output.includes('PLANTED') ? `link not followed (read ${read.status})` : refusal(output)
    )
  } finally {
    await removeAgentLinks(range, ['leak.txt', 'written.txt'])
  }
}

// ---------------------------------------------------------------------------
// Network attacks: the agent connects to something on this machine.

async function connectFromAgent(
  range: RedTeamRange,
  host: string,
  port: number,
  listener?: CountingListener
): Promise<Outcome> {
  if (!(await answersFromHost(host, port))) {
    throw new NotApplicable(`nothing answers on ${host}:${port} here`)
  }
  const before = listener?.connections ?? 0
  const output = await range.runInAgent(
    bashScript(
      [
        // bash's /dev/tcp where there is bash, else nc (a BusyBox image): both exit 0 on connect.
        'if command -v bash >/dev/null 2>&1; then',
        `  timeout 8 bash -c 'exec 3<>/dev/tcp/${host}/${port}' 2>&1`,
        'else',
        `  timeout 8 nc ${host} ${port} </dev/null 2>&1`,
        'fi',
        'echo "probe-exit=$?"',
      ].join('\n')
    )
  )
  if (/probe-exit=0\b/.test(output) || (listener && listener.connections > before)) {
    return succeeded(`connected to ${host}:${port}`)
  }
  return refused(refusal(output))
}

function databaseAddress(): { host: string; port: number } {
  const url = new URL(process.env.DATABASE_URL ?? 'postgres://127.0.0.1:5432/')
  return { host: url.hostname || '127.0.0.1', port: Number(url.port) || 5432 }
}

// ---------------------------------------------------------------------------
// Privilege attacks.

async function setuidProgram(range: RedTeamRange): Promise<Outcome> {
  const programs = setuidRootPrograms(['/usr/bin/su', '/bin/su', '/usr/bin/mount', '/bin/mount'])
  if (programs.length === 0) throw new NotApplicable('no setuid-root su or mount on this host')
  const output = await range.runInAgent(
    bashScript(
      [
        "grep -E '^(NoNewPrivs|CapBnd)' /proc/self/status",
        // su waits for a password on the pipe: long enough to read its effective uid.
        'sleep 6 | su root -c true >/dev/null 2>&1 &',
        'pid=$!',
        'euid=none',
        'for i in $(seq 1 60); do',
        '  line=$(grep "^Uid:" /proc/$pid/status 2>/dev/null) || break',
        '  set -- $line; euid=$3',
        '  [ "$euid" = 0 ] && break',
        '  sleep 0.05',
        'done',
        'echo "su-euid=$euid"',
        'kill $pid 2>/dev/null',
        'mkdir -p "$HOME/red-team-mount" 2>/dev/null',
        // POSIX sh (a BusyBox image has no bash): mount's status, then its first line.
        'out=$(mount -t tmpfs red-team "$HOME/red-team-mount" 2>&1)',
        'echo "mount-exit=$?"',
        'printf "%s\\n" "$out" | head -1',
        'umount "$HOME/red-team-mount" 2>/dev/null',
      ].join('\n')
    )
  )
  if (/su-euid=0\b/.test(output)) return succeeded('su ran with effective uid 0')
  if (/mount-exit=0\b/.test(output)) return succeeded('mount mounted a file system')
  const noNewPrivs = /NoNewPrivs:\s*(\d)/.exec(output)?.[1]
  const euid = /su-euid=(\S+)/.exec(output)?.[1]
  if (!euid) return refused(refusal(output))
  return refused(`su euid ${euid}${noNewPrivs ? `, NoNewPrivs ${noNewPrivs}` : ''}`)
}

async function procListsHostProcesses(
  range: RedTeamRange,
  marked: { marker: string; child: ChildProcess }
): Promise<Outcome> {
  const cmdline = await readFile(`/proc/${marked.child.pid}/cmdline`, 'utf8').catch(() => '')
  assert(cmdline.includes(marked.marker), 'the marked host process is in the host /proc')
  // The marker never appears whole in any command line of the agent's (it is put together in a file).
  const half = Math.floor(marked.marker.length / 2)
  const output = await range.runInAgent(
    bashScript(
      [
        'pattern=$(mktemp)',
        `printf '%s%s' '${marked.marker.slice(0, half)}' '${marked.marker.slice(half)}' > "$pattern"`,
        // -l names a matching file even when it holds NULs (GNU and BusyBox grep alike).
        'grep -l -F -f "$pattern" /proc/[0-9]*/cmdline 2>/dev/null | head -3',
        'echo "processes-visible=$(ls -d /proc/[0-9]* 2>/dev/null | wc -l)"',
        'rm -f "$pattern"',
      ].join('\n')
    )
  )
  if (/\/proc\/\d+\/cmdline/.test(output)) return succeeded('a host process is visible in /proc')
  const visible = /processes-visible=(\d+)/.exec(output)?.[1]
  // A pid namespace of its own or a procfs hiding other uids (bubblewrap as root): the count says which it saw.
  return refused(visible ? `only ${visible} processes listed, none of the host's` : refusal(output))
}

const IO_URING_PYTHON = [
  'import ctypes, os',
  'libc = ctypes.CDLL(None, use_errno=True)',
  'params = ctypes.create_string_buffer(120)',
  'fd = libc.syscall(425, 4, params)',
  'print("io_uring-fd=%d %s" % (fd, os.strerror(ctypes.get_errno()) if fd < 0 else "opened"))',
].join('\n')
const IO_URING_PERL =
  '$p = "\\0" x 120; $r = syscall(425, 4, $p); print "io_uring-fd=$r ", ($r < 0 ? "$!" : "opened"), "\\n"'

/**
 * The static io_uring probe (tests/fixtures/redteam/io_uring_probe.c) for an
 * agent with neither python3 nor perl, as base64; undefined where it cannot
 * be built here (no gcc, not x86-64).
 */
function ioUringProbe(): string | undefined {
  if (process.arch !== 'x64') return undefined
  const binary = join(tmpdir(), `red-team-io-uring-probe-${process.pid}`)
  const built = spawnSync(
    'gcc',
    [
      ...['-static', '-nostdlib', '-Os', '-fno-stack-protector', '-fno-asynchronous-unwind-tables'],
      ...['-Wl,--build-id=none', '-s', '-o', binary],
      join(import.meta.dirname, '../fixtures/redteam/io_uring_probe.c'),
    ],
    { encoding: 'utf8' }
  )
  if (built.status !== 0) return undefined
  try {
    return readFileSync(binary).toString('base64')
  } finally {
    rmSync(binary, { force: true })
  }
}

const ERRNO_NAMES = new Map(Object.entries(osConstants.errno).map(([name, value]) => [value, name]))

async function ioUringSetup(range: RedTeamRange): Promise<Outcome> {
  const onHost = spawnSync('python3', ['-c', IO_URING_PYTHON], { encoding: 'utf8' })
  const hostFd = Number(/io_uring-fd=(-?\d+)/.exec(onHost.stdout ?? '')?.[1] ?? -1)
  if (hostFd < 0) {
    throw new NotApplicable(
      `io_uring_setup fails on the host itself: ${onHost.stdout || onHost.stderr}`
    )
  }
  const probe = ioUringProbe()
  const output = await range.runInAgent(
    bashScript(
      [
        'if command -v python3 >/dev/null 2>&1; then',
        `python3 - <<'PYTHON'\n${IO_URING_PYTHON}\nPYTHON`,
        'elif command -v perl >/dev/null 2>&1; then',
        `perl -e '${IO_URING_PERL}'`,
        ...(probe
          ? [
              // The agent writes and runs a program of its own (a static binary, no libc), from
              // the first writable folder that lets it (a container's /tmp may be noexec).
              'else',
              'for dir in "${TMPDIR:-/tmp}" /tmp "$HOME" "$PWD"; do',
              '  probe="$dir/io-uring-probe-$$"',
              `  echo '${probe}' | base64 -d > "$probe" 2>/dev/null && chmod 700 "$probe" || continue`,
              '  result=$("$probe" 2>&1)',
              '  rm -f "$probe"',
              '  echo "$result"',
              '  case "$result" in *io_uring-fd=*) break ;; esac',
              'done',
            ]
          : ['else echo "io_uring-fd=none: neither python3 nor perl"']),
        'fi',
      ].join('\n')
    )
  )
  const fd = /io_uring-fd=(-?\d+)\s*(.*)/.exec(output)
  if (fd && Number(fd[1]) >= 0) return succeeded('io_uring_setup gave a ring')
  if (/io_uring-fd=none/.test(output)) {
    throw new NotApplicable('the agent has neither python3 nor perl, and no probe could be built')
  }
  if (!fd) return refused(refusal(output))
  // The probe prints the negative errno; python3 and perl print -1 and the error's text.
  const errno = fd[2].trim() === 'refused' ? ERRNO_NAMES.get(-Number(fd[1])) : undefined
  return refused(errno ?? (fd[2].trim().slice(0, 40) || 'refused'))
}

// ---------------------------------------------------------------------------

/** Node's assert, so a failed precondition stops the test with its message. */
function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(`precondition failed: ${message}`)
}

interface HostTargets {
  privateListener?: CountingListener
  privateProblem?: string
  hostListener?: CountingListener
  marked?: { marker: string; child: ChildProcess }
}

interface Attack {
  name: string
  title: string
  run(range: RedTeamRange, targets: HostTargets): Promise<Outcome>
}

/** Cheapest first; the one that restarts the agent last. */
const ATTACKS: Attack[] = [
  {
    name: 'loopback PostgreSQL',
    title: 'the agent cannot reach PostgreSQL on the host loopback',
    run: (range) => connectFromAgent(range, databaseAddress().host, databaseAddress().port),
  },
  {
    name: 'loopback Redis',
    title: 'the agent cannot reach Redis on 127.0.0.1:6379',
    run: (range) => connectFromAgent(range, '127.0.0.1', 6379),
  },
  {
    name: "service's own port",
    title: "the agent cannot reach the service's own port on the host loopback",
    run: (range) => connectFromAgent(range, '127.0.0.1', range.port),
  },
  {
    name: "another agent's gateway",
    title: "the agent cannot reach another agent's gateway",
    async run(range) {
      if (!range.victim) throw new NotApplicable(`no victim agent: ${range.victimProblem}`)
      const gateway = await gatewayOf(range, range.victim.id)
      return connectFromAgent(range, gateway.host, gateway.port)
    },
  },
  {
    name: 'private-range address',
    title: 'the agent cannot reach a private-range address of this machine',
    run(range, targets) {
      if (!targets.privateListener) throw new NotApplicable(targets.privateProblem ?? 'no listener')
      return connectFromAgent(
        range,
        PRIVATE_ADDRESS,
        targets.privateListener.port,
        targets.privateListener
      )
    },
  },
  {
    name: "host's non-loopback address",
    title: "the agent cannot reach the host's own non-loopback address",
    run(range, targets) {
      if (!targets.hostListener) throw new NotApplicable('this machine has no non-loopback address')
      return connectFromAgent(
        range,
        targets.hostListener.host,
        targets.hostListener.port,
        targets.hostListener
      )
    },
  },
  {
    name: 'setuid su / mount',
    title: 'setuid programs (su, mount) give the agent no privileges',
    run: (range) => setuidProgram(range),
  },
  {
    name: '/proc host processes',
    title: "the agent's /proc does not list host processes",
    run(range, targets) {
      return procListsHostProcesses(range, targets.marked!)
    },
  },
  {
    name: 'io_uring_setup',
    title: 'io_uring_setup is refused to the agent',
    run: (range) => ioUringSetup(range),
  },
  {
    name: 'files API through link',
    title: 'the files API neither reads nor writes through a link the agent planted',
    run: (range) => filesApiThroughLink(range),
  },
  {
    name: 'knowledge link',
    title: 'a knowledge upload is not written through a link the agent planted',
    run: (range) => knowledgeLink(range),
  },
  {
    name: 'skills link',
    title: 'a skill install is not written through a skills/ link the agent planted',
    run: (range) => skillsLink(range),
  },
  {
    name: 'runtime folder links, logs read',
    title: 'runtime folder swapped for links: the logs API never returns the APP_KEY',
    run: (range) => runtimeLinkSwap(range),
  },
  {
    name: 'log rotation through link',
    title: 'log rotation never writes through an output.log.1 link the agent planted',
    run: (range) => rotationThroughLink(range),
  },
  {
    name: 'SOUL.md link + config change + restart',
    title: 'a config change and restart never write the owner text through a SOUL.md link',
    run: (range) => soulLinkAndRestart(range),
  },
]

/** The red team's tests on the sandbox mode `name`. */
export function redTeamGroup(name: RedTeamModeName) {
  const mode = SANDBOX_MODES.find((candidate) => candidate.name === name)!
  test.group(`Red team / ${mode.name}`, (group) => {
    let range: RedTeamRange | undefined
    let skipReason: string | undefined
    const targets: HostTargets = {}

    group.setup(async () => {
      skipReason = await mode.unavailable()
      if (skipReason) {
        console.log(`  SKIPPED red team on ${mode.name}: ${skipReason}`)
        for (const attack of ATTACKS)
          recordOutcome(attack.name, mode.name, `skipped: ${skipReason}`)
        return
      }
      const problem = addPrivateAddress()
      if (problem) targets.privateProblem = `no dummy interface: ${problem}`
      else targets.privateListener = await startCountingListener(PRIVATE_ADDRESS)
      const address = hostAddress()
      if (address) targets.hostListener = await startCountingListener(address)
      targets.marked = startMarkedHostProcess()
      try {
        range = await startRange(mode)
      } catch (error) {
        await teardown()
        throw error
      }
    })
    group.teardown(() => teardown())

    async function teardown() {
      await range?.close()
      range = undefined
      await targets.privateListener?.close()
      await targets.hostListener?.close()
      removePrivateAddress()
      targets.marked?.child.kill('SIGKILL')
    }

    for (const attack of ATTACKS) {
      test(attack.title)
        .skip(() => skipReason !== undefined, `${mode.name} cannot run here (reason printed above)`)
        .timeout(900_000)
        .run(async ({ assert: japaAssert }) => {
          const current = range!
          let outcome: Outcome
          try {
            outcome = await attack.run(current, targets)
          } catch (error) {
            if (error instanceof NotApplicable) {
              console.log(`  n/a: ${attack.name} on ${mode.name}: ${error.message}`)
              recordOutcome(attack.name, mode.name, `n/a (${error.message})`)
              return
            }
            recordOutcome(attack.name, mode.name, `test error: ${(error as Error).message}`)
            throw error
          }
          recordOutcome(
            attack.name,
            mode.name,
            outcome.succeeded ? `SUCCEEDED (${outcome.how})` : `refused (${outcome.how})`
          )
          japaAssert.isFalse(
            outcome.succeeded,
            `${attack.name} on ${mode.name} SUCCEEDED: ${outcome.how}`
          )
        })
    }
  })
}
