import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { connect, createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { test } from '@japa/runner'
import pg from 'pg'
import {
  acquireEmbeddedPostgres,
  type EmbeddedPostgresHandle,
} from '#core/database/embedded_postgres'
import { findFreePort, PREFERRED_PORT } from '#core/database/embedded/cluster'

const projectRoot = fileURLToPath(new URL('../../', import.meta.url))

async function queryValue(url: string, sql: string): Promise<unknown> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const result = await client.query(sql)
    return Object.values(result.rows[0])[0]
  } finally {
    await client.end()
  }
}

function portOf(url: string): number {
  return Number(new URL(url).port)
}

function isPortOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port })
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

/**
 * Pids of live (non-zombie) postmasters started with `-D <dataDir>`. A
 * backend just forked still shows the postmaster's command line until it
 * sets its title: a match whose parent matches too is such a child.
 */
function postmastersOf(dataDir: string): number[] {
  const matches = new Map<number, number>()
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      if (fields[0] === 'Z') continue
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
      if (argv[0].endsWith('/postgres') && argv.includes(dataDir)) {
        matches.set(Number(pid), Number(fields[1]))
      }
    } catch {
      continue
    }
  }
  return [...matches].filter(([, parent]) => !matches.has(parent)).map(([pid]) => pid)
}

function postmasterPid(dataDir: string): number {
  return Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0])
}

/** A pid that certainly belonged to a process which has exited. */
function deadPid(): number {
  return spawnSync(process.execPath, ['-e', '']).pid
}

async function waitUntil(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out waiting for condition')
    await sleep(50)
  }
}

/** Safety net after each test: no postmaster may outlive it, whatever failed. */
async function killPostmasters(dataDir: string): Promise<void> {
  for (const pid of postmastersOf(dataDir)) process.kill(pid, 'SIGINT')
  await waitUntil(() => postmastersOf(dataDir).length === 0)
}

/** Acquires from a separate Node process, which the test can then kill. */
async function acquireInChild(dataDir: string): Promise<{ child: ChildProcess; url: string }> {
  const script = [
    "const { acquireEmbeddedPostgres } = await import('#core/database/embedded_postgres')",
    'const options = { dataDir: process.env.PG_TEST_DATA_DIR, database: "app_test", log() {} }',
    'console.log((await acquireEmbeddedPostgres(options)).url)',
    'setInterval(() => {}, 1000)',
  ].join('\n')
  const child = spawn(
    process.execPath,
    ['--import', '@poppinss/ts-exec', '--input-type=module', '--eval', script],
    { cwd: projectRoot, env: { ...process.env, PG_TEST_DATA_DIR: dataDir }, stdio: 'pipe' }
  )
  const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string]
  return { child, url: line }
}

function listen(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => resolve(server))
  })
}

test.group('Embedded PostgreSQL', (group) => {
  let dataDir: string
  let logs: string[]
  let handles: EmbeddedPostgresHandle[]
  let template: string

  // One initdb for the group; most tests start from a copy of this stopped cluster.
  group.setup(async () => {
    template = join(mkdtempSync(join(tmpdir(), 'embedded-pg-template-')), 'postgres')
    const handle = await acquireEmbeddedPostgres({
      dataDir: template,
      database: 'app_test',
      log: () => {},
    })
    await handle.release()
    return () => rmSync(dirname(template), { recursive: true, force: true })
  })

  group.each.timeout(20_000)
  group.each.setup(() => {
    const root = mkdtempSync(join(tmpdir(), 'embedded-pg-'))
    dataDir = join(root, 'postgres')
    logs = []
    handles = []
    return async () => {
      for (const handle of handles) await handle.release()
      await killPostmasters(dataDir)
      rmSync(root, { recursive: true, force: true })
    }
  })

  async function acquire(): Promise<EmbeddedPostgresHandle> {
    const handle = await acquireEmbeddedPostgres({
      dataDir,
      database: 'app_test',
      log: (message) => logs.push(message),
    })
    handles.push(handle)
    return handle
  }

  /** An initialised, stopped cluster (with its password file) in dataDir; cp -a keeps owners. */
  function copyTemplate(): void {
    for (const suffix of ['', '.password']) {
      const copy = spawnSync('cp', ['-a', `${template}${suffix}`, `${dataDir}${suffix}`])
      if (copy.status !== 0) throw new Error(`cp failed: ${copy.stderr}`)
    }
  }

  test('initialises, starts and serves the database on first use', async ({ assert }) => {
    const handle = await acquire()

    assert.match(handle.url, /^postgres:\/\/postgres:[^@]+@127\.0\.0\.1:\d+\/app_test$/)
    assert.equal(await queryValue(handle.url, 'SELECT current_database()'), 'app_test')
    assert.equal(await queryValue(handle.url, 'SHOW listen_addresses'), '127.0.0.1')
    assert.equal(await queryValue(handle.url, 'SHOW unix_socket_directories'), '')
    assert.isTrue(existsSync(join(dataDir, 'PG_VERSION')))

    const passwordFile = `${dataDir}.password`
    assert.equal(statSync(passwordFile).mode & 0o777, 0o600)
    const password = readFileSync(passwordFile, 'utf8').trim()
    assert.equal(decodeURIComponent(new URL(handle.url).password), password)
    assert.isFalse(logs.some((line) => line.includes(password)))
    assert.isTrue(logs.some((line) => line.includes(`started on 127.0.0.1:${portOf(handle.url)}`)))
    if (process.getuid?.() === 0) {
      // mkdtemp made the parent 0700: the unprivileged server user needed o+x on it.
      assert.equal(statSync(dirname(dataDir)).mode & 0o001, 0o001)
      assert.isTrue(logs.some((line) => line.startsWith('granted search permission (o+x)')))
    }
  })

  test('a second holder reuses the running server', async ({ assert }) => {
    copyTemplate()
    const first = await acquire()
    const pid = postmasterPid(dataDir)
    const second = await acquire()

    assert.equal(portOf(second.url), portOf(first.url))
    assert.equal(postmasterPid(dataDir), pid)
    assert.deepEqual(postmastersOf(dataDir), [pid])
    assert.isTrue(logs.some((line) => line.startsWith('reusing embedded PostgreSQL')))
    assert.equal(await queryValue(second.url, 'SELECT 1'), 1)
  })

  test('the server stops only when the last holder releases', async ({ assert }) => {
    copyTemplate()
    const first = await acquire()
    const second = await acquire()
    const port = portOf(first.url)

    await first.release()
    assert.equal(await queryValue(second.url, 'SELECT 2'), 2)
    assert.lengthOf(postmastersOf(dataDir), 1)

    // Idempotent, also when a signal handler and normal shutdown race.
    await Promise.all([second.release(), second.release()])
    await second.release()
    assert.isFalse(await isPortOpen(port))
    assert.lengthOf(postmastersOf(dataDir), 0)
    assert.isFalse(existsSync(join(dataDir, 'postmaster.pid')))
    assert.lengthOf(
      logs.filter((line) => line.startsWith('embedded PostgreSQL stopped')),
      1
    )
  })

  test('starts despite a postmaster.pid and lock left by a dead process', async ({ assert }) => {
    copyTemplate()
    const pid = deadPid()
    const stale = `${pid}\n${dataDir}\n0\n${PREFERRED_PORT}\n\n127.0.0.1\n0 0\nready   \n`
    writeFileSync(join(dataDir, 'postmaster.pid'), stale)
    writeFileSync(`${dataDir}.lock`, `${pid}-1`)

    const handle = await acquire()
    assert.equal(await queryValue(handle.url, 'SELECT 3'), 3)
    assert.isTrue(logs.some((line) => line.startsWith('removed stale postmaster.pid')))
    assert.lengthOf(postmastersOf(dataDir), 1)
  })

  test('starts despite a postmaster.pid naming a live non-postgres process', async ({ assert }) => {
    copyTemplate()
    const stale = `${process.pid}\n${dataDir}\n0\n${PREFERRED_PORT}\n\n127.0.0.1\n0 0\nready   \n`
    writeFileSync(join(dataDir, 'postmaster.pid'), stale)

    const handle = await acquire()
    assert.equal(await queryValue(handle.url, 'SELECT 4'), 4)
    assert.notEqual(postmasterPid(dataDir), process.pid)
  })

  test('recovers after the postmaster was killed with SIGKILL', async ({ assert }) => {
    copyTemplate()
    const crashed = await acquire()
    const pid = postmasterPid(dataDir)
    process.kill(pid, 'SIGKILL')
    await waitUntil(() => postmastersOf(dataDir).length === 0)

    const handle = await acquire()
    assert.notEqual(postmasterPid(dataDir), pid)
    assert.equal(await queryValue(handle.url, 'SELECT 5'), 5)
    await crashed.release()
    assert.equal(await queryValue(handle.url, 'SELECT 6'), 6)
  })

  test('adopts the server of a process killed with SIGKILL', async ({ assert }) => {
    copyTemplate()
    const starter = await acquireInChild(dataDir)
    const pid = postmasterPid(dataDir)
    starter.child.kill('SIGKILL')
    await once(starter.child, 'exit')

    const adopter = await acquire()
    assert.equal(postmasterPid(dataDir), pid)
    assert.equal(portOf(adopter.url), portOf(starter.url))
    assert.isTrue(logs.some((line) => line.startsWith('adopting orphaned embedded PostgreSQL')))
    assert.equal(await queryValue(adopter.url, 'SELECT 8'), 8)

    // The dead starter's holder no longer counts: releasing the adopter stops the server.
    await adopter.release()
    assert.lengthOf(postmastersOf(dataDir), 0)
  })

  test('two processes starting together share one server', async ({ assert }) => {
    const starters = await Promise.all([acquireInChild(dataDir), acquireInChild(dataDir)])
    try {
      assert.equal(portOf(starters[0].url), portOf(starters[1].url))
      assert.deepEqual(postmastersOf(dataDir), [postmasterPid(dataDir)])
      assert.equal(await queryValue(starters[1].url, 'SELECT 9'), 9)
    } finally {
      for (const { child } of starters) child.kill('SIGKILL')
    }
  })

  test('uses the next free port when the preferred one is taken', async ({ assert }) => {
    copyTemplate()
    const taken = await findFreePort(PREFERRED_PORT)
    const server = await listen(taken)
    try {
      const handle = await acquire()
      assert.isAbove(portOf(handle.url), taken)
      assert.equal(await queryValue(handle.url, 'SELECT 7'), 7)
    } finally {
      server.close()
    }
  })
})
