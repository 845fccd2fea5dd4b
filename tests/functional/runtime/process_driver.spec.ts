import { randomUUID } from 'node:crypto'
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { cpus } from 'node:os'
import { test } from '@japa/runner'
import { AgentNotRunningException, NotFoundException } from '#core/exceptions/api_exceptions'
import { agentPaths } from '#runtime/agent_paths'
import { ModelGatewayError } from '#core/openai/gateway_errors'
import { isAlive } from '#runtime/process/proc_stats'
import { markedProcesses, readRecord } from '#runtime/process/process_record'
import { fixtureSpec, processHarness, waitFor, type RuntimeHarness } from '#tests/helpers/runtime'

const newId = () => randomUUID()

async function pidOf(harness: RuntimeHarness, agentId: string): Promise<number> {
  const record = await readRecord(agentPaths(harness.agentsDir, agentId).recordFile)
  if (!record) throw new Error(`no process record for ${agentId}`)
  return record.pid
}

async function tokenOf(harness: RuntimeHarness, agentId: string): Promise<string> {
  const raw = await readFile(agentPaths(harness.agentsDir, agentId).credentialsFile, 'utf8')
  return JSON.parse(raw).gatewayToken
}

async function stateOf(harness: RuntimeHarness, agentId: string) {
  const info = await harness.runtime.status(agentId)
  return info.state
}

async function startReady(harness: RuntimeHarness, agentId: string, config = {}) {
  const info = await harness.runtime.ensureStarted(fixtureSpec(agentId, config))
  await harness.runtime.waitUntilReady(agentId, { timeoutMs: 15_000 })
  return info
}

async function collect(stream: AsyncIterable<{ token: string }>): Promise<string[]> {
  const tokens: string[] = []
  for await (const chunk of stream) tokens.push(chunk.token)
  return tokens
}

test.group('Runtime / process driver lifecycle', (group) => {
  let harness: RuntimeHarness
  group.each.setup(async () => {
    harness = await processHarness()
    return () => harness.cleanup()
  })

  test('starts, becomes ready, chats (whole and streamed), stops and starts again', async ({
    assert,
  }) => {
    const agentId = newId()
    const started = await harness.runtime.ensureStarted(fixtureSpec(agentId))
    assert.equal(started.driver, 'process')
    assert.oneOf(started.state, ['running', 'starting'])
    assert.match(started.containerId!, /^proc-[0-9a-f]{12}$/)
    // The host's loopback, or the agent's address in its own network namespace (as root).
    assert.match(started.baseUrl!, /^http:\/\/(127\.0\.0\.1|\d+\.\d+\.\d+\.\d+):\d+$/)

    await harness.runtime.waitUntilReady(agentId, { timeoutMs: 15_000 })
    assert.isTrue(await harness.runtime.isRunning(agentId))
    assert.isTrue(
      harness.events.some((event) => event.type === 'ready' && event.agentId === agentId)
    )

    const reply = await harness.runtime.chat(agentId, {
      conversationId: 'conv-1',
      messages: [{ role: 'user', content: 'hello there' }],
    })
    assert.equal(reply.content, 'echo: hello there')
    assert.equal(reply.model, 'fixture')
    assert.equal(reply.usage?.inputTokens, 3)

    const stream = harness.runtime.chatStream(agentId, {
      conversationId: 'conv-1',
      messages: [{ role: 'user', content: 'streamed words come back' }],
    })
    const tokens = await collect(stream)
    assert.isAbove(tokens.length, 2, 'the reply arrives in several chunks')
    assert.equal(tokens.join(''), 'echo: streamed words come back')

    // The conversation id reaches the framework as OpenAI `user`.
    assert.include(await harness.runtime.logs(agentId), 'chat user=conv-1 stream=true')

    const pid = await pidOf(harness, agentId)
    await harness.runtime.stop(agentId)
    const stopped = await harness.runtime.status(agentId)
    assert.equal(stopped.state, 'stopped')
    assert.isNull(stopped.baseUrl)
    assert.isFalse(isAlive(pid), 'the process is gone after stop')
    assert.isTrue(harness.events.some((event) => event.type === 'stopped'))
    await assert.rejects(
      () => harness.runtime.chat(agentId, { conversationId: 'c', messages: [] }),
      AgentNotRunningException
    )
    await assert.rejects(() => harness.runtime.monitoring(agentId), AgentNotRunningException)
    await assert.rejects(() => harness.runtime.files(agentId), AgentNotRunningException)
    await assert.rejects(() => harness.runtime.memory(agentId), AgentNotRunningException)
    // Following the logs of a container that is not running gives its stored tail (and goes
    // live once it runs); the 409 for a stopped agent is the agents area's, by its stored
    // status (tests/functional/agents/logs.spec.ts).
    const following = new AbortController()
    const lines = await harness.runtime.followLogs(agentId, { tail: 5, signal: following.signal })
    const first = await lines[Symbol.asyncIterator]().next()
    following.abort()
    assert.isString(first.value)
    // Plain logs stay readable after a stop.
    assert.include(await harness.runtime.logs(agentId), 'received SIGTERM')

    const again = await startReady(harness, agentId)
    assert.notEqual(again.containerId, started.containerId)
    const stats = await harness.runtime.stats(agentId)
    assert.equal(stats.status, 'running')
    assert.equal(stats.containerId, again.containerId)
    assert.isAtLeast(stats.uptimeSecs, 0)
  }).timeout(60_000)

  test('restart gives a new container id and a new process', async ({ assert }) => {
    const agentId = newId()
    const first = await startReady(harness, agentId)
    const firstPid = await pidOf(harness, agentId)

    const second = await harness.runtime.restart(fixtureSpec(agentId), { waitReady: true })
    assert.equal(second.state, 'running')
    assert.notEqual(second.containerId, first.containerId)
    const secondPid = await pidOf(harness, agentId)
    assert.notEqual(secondPid, firstPid)
    assert.isFalse(isAlive(firstPid))
    assert.isTrue(isAlive(secondPid))
  }).timeout(60_000)

  test('a crash is restarted with backoff and counted', async ({ assert }) => {
    const agentId = newId()
    const first = await startReady(harness, agentId)
    const firstPid = await pidOf(harness, agentId)

    await assert.rejects(
      () =>
        harness.runtime.chat(agentId, {
          conversationId: 'c',
          messages: [{ role: 'user', content: '__crash__' }],
        }),
      ModelGatewayError
    )
    await waitFor('the restart event', () =>
      harness.events.find((event) => event.type === 'restarting' && event.agentId === agentId)
    )
    await waitFor('a new process', async () => {
      const info = await harness.runtime.status(agentId)
      return info.state === 'running' && info.containerId !== first.containerId
    })
    await harness.runtime.waitUntilReady(agentId, { timeoutMs: 15_000 })
    assert.notEqual(await pidOf(harness, agentId), firstPid)

    const figures = await harness.runtime.monitoring(agentId)
    assert.equal(figures.restartCount, 1)
    assert.equal(figures.status, 'running')
    const exited = harness.events.find((event) => event.type === 'exited')
    assert.include(exited && 'reason' in exited ? exited.reason : '', 'exited with code 1')
    assert.include(await harness.runtime.logs(agentId), 'crash requested by chat')

    const reply = await harness.runtime.chat(agentId, {
      conversationId: 'c',
      messages: [{ role: 'user', content: 'still here' }],
    })
    assert.equal(reply.content, 'echo: still here')
  }).timeout(60_000)

  test('a killed launcher leaves none of its processes beside the restart', async ({ assert }) => {
    const agentId = newId()
    const first = await startReady(harness, agentId)
    const before = markedProcesses(agentId)
    // The launcher (a sandbox's bwrap, or the framework itself) dies; what ran under
    // it would live on as an orphan next to the restarted agent.
    process.kill(await pidOf(harness, agentId), 'SIGKILL')
    await waitFor('a new process', async () => {
      const info = await harness.runtime.status(agentId)
      return info.state === 'running' && info.containerId !== first.containerId
    })
    await harness.runtime.waitUntilReady(agentId, { timeoutMs: 15_000 })
    assert.deepEqual(
      before.filter((pid) => isAlive(pid)),
      [],
      'every process of the killed run is gone'
    )
    assert.lengthOf(markedProcesses(agentId), before.length, 'the restart runs once')
  }).timeout(60_000)

  test('repeated crashes end in the error status with an error event', async ({ assert }) => {
    const agentId = newId()
    await harness.runtime.ensureStarted(fixtureSpec(agentId, { crashOnStart: true }))
    const error = await waitFor(
      'the error event',
      () => harness.events.find((event) => event.type === 'error' && event.agentId === agentId),
      20_000
    )
    assert.equal(error.type, 'error')
    assert.include('message' in error ? error.message : '', 'gave up after 2 restarts')
    const info = await harness.runtime.status(agentId)
    assert.equal(info.state, 'error')
    assert.equal(info.restartCount, 2)
    assert.include(info.lastError!, 'exited with code 3')
    assert.lengthOf(
      harness.events.filter((event) => event.type === 'restarting' && event.agentId === agentId),
      2
    )
    await assert.rejects(
      () => harness.runtime.waitUntilReady(agentId, { timeoutMs: 2000 }),
      AgentNotRunningException
    )
    await assert.rejects(() => harness.runtime.monitoring(agentId), AgentNotRunningException)
    assert.include(await harness.runtime.logs(agentId), 'crashing on start as configured')

    // An explicit start (here with a config that no longer crashes) begins a fresh count.
    await harness.runtime.ensureStarted(fixtureSpec(agentId, { crashOnStart: false }))
    await harness.runtime.waitUntilReady(agentId, { timeoutMs: 15_000 })
    const fresh = await harness.runtime.status(agentId)
    assert.equal(fresh.restartCount, 0)
  }).timeout(60_000)

  test('stop sends SIGKILL after the grace period to a process ignoring SIGTERM', async ({
    assert,
  }) => {
    const agentId = newId()
    await startReady(harness, agentId, { ignoreSigterm: true })
    const pid = await pidOf(harness, agentId)
    const before = Date.now()
    await harness.runtime.stop(agentId)
    assert.isAtLeast(Date.now() - before, 2900, 'waited for the grace period')
    assert.isFalse(isAlive(pid))
    const logs = await harness.runtime.logs(agentId)
    assert.include(logs, 'ignoring SIGTERM as configured')
    assert.include(logs, 'SIGKILL')
    assert.equal(await stateOf(harness, agentId), 'stopped')
  }).timeout(30_000)

  test('remove deletes the agent folder; sweep stops agents that no longer exist', async ({
    assert,
  }) => {
    const kept = newId()
    const orphan = newId()
    await startReady(harness, kept)
    await startReady(harness, orphan)
    const orphanPid = await pidOf(harness, orphan)

    const swept = await harness.runtime.recover([fixtureSpec(kept)])
    assert.deepEqual(swept.swept, [orphan])
    assert.deepEqual(swept.adopted, [kept])
    assert.isFalse(isAlive(orphanPid))
    assert.isTrue(await harness.runtime.isRunning(kept))

    const keptPid = await pidOf(harness, kept)
    await harness.runtime.remove(kept)
    assert.isFalse(isAlive(keptPid))
    assert.isFalse(existsSync(agentPaths(harness.agentsDir, kept).root))
    assert.equal(await stateOf(harness, kept), 'absent')
    await assert.rejects(() => harness.driver.start(kept), NotFoundException)
  }).timeout(60_000)
})

test.group('Runtime / process driver observation', (group) => {
  let harness: RuntimeHarness
  let agentId: string
  group.setup(async () => {
    harness = await processHarness()
    agentId = newId()
    await startReady(harness, agentId)
    return () => harness.cleanup()
  })

  test('logs: tail N lines and a live follow', async ({ assert }) => {
    const all = await harness.runtime.logs(agentId)
    assert.include(all, 'listening on 127.0.0.1:')
    assert.include(all, '[runtime ')
    const lastTwo = await harness.runtime.logs(agentId, { tail: 2 })
    const two = lastTwo.split('\n')
    assert.lengthOf(two, 2)
    assert.deepEqual(two, all.split('\n').slice(-2))

    const controller = new AbortController()
    const live = await harness.runtime.followLogs(agentId, { signal: controller.signal })
    const seen: string[] = []
    const reading = (async () => {
      for await (const line of live) {
        seen.push(line)
        if (line.includes('follow-marker-42')) controller.abort()
      }
    })()
    await harness.runtime.chat(agentId, {
      conversationId: 'c',
      messages: [{ role: 'user', content: 'follow-marker-42' }],
    })
    await Promise.race([
      reading,
      waitFor(
        'the followed line',
        () => seen.some((line) => line.includes('follow-marker-42')),
        5000
      ),
    ])
    controller.abort()
    assert.isTrue(seen.some((line) => line.includes('message=follow-marker-42')))
    assert.isFalse(
      seen.some((line) => line.includes('listening on')),
      'follow starts at the end'
    )
  }).timeout(20_000)

  test('logs never show the agent secrets', async ({ assert }) => {
    const { baseUrl: base } = await harness.runtime.status(agentId)
    await fetch(
      `${base}/log?lines=1&text=${encodeURIComponent('token proxy-token-for-tests here')}`,
      {
        method: 'POST',
        headers: { authorization: 'Bearer wrong' },
      }
    )
    const gateway = await tokenOf(harness, agentId)
    await fetch(
      `${base}/log?lines=1&text=${encodeURIComponent(`gw ${gateway} proxy proxy-token-for-tests`)}`,
      {
        method: 'POST',
        headers: { authorization: `Bearer ${gateway}` },
      }
    )
    const logs = await harness.runtime.logs(agentId, { tail: 5 })
    assert.include(logs, 'gw *** proxy ***')
    assert.notInclude(logs, gateway)
    assert.notInclude(logs, 'proxy-token-for-tests')
  })

  test('monitoring: memory from /proc and CPU over a busy window', async ({ assert }) => {
    const idle = await harness.runtime.monitoring(agentId)
    assert.equal(idle.status, 'running')
    assert.equal(idle.memoryLimitMb, 256)
    assert.isAbove(idle.memoryMb, 10, 'a Node process holds more than 10 MB resident')
    assert.isBelow(idle.memoryMb, 256)
    assert.isAtLeast(idle.cpuPercent, 0)

    const { baseUrl: base } = await harness.runtime.status(agentId)
    const token = await tokenOf(harness, agentId)
    const burning = fetch(`${base}/burn?ms=1500`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    })
    await new Promise((resolve) => setTimeout(resolve, 100))
    const busy = await harness.runtime.monitoring(agentId)
    await burning
    // Well above idle, not near a full core: the fixture has a 0.5 CPU quota and, in its cgroup,
    // half the weight of other work, on a machine that may be busy.
    assert.isAbove(busy.cpuPercent, 5, `a busy loop shows (${busy.cpuPercent}%)`)
    assert.isAtMost(busy.cpuPercent, 100 * cpus().length + 10)
  }).timeout(20_000)

  test('memory comes from the framework plugin', async ({ assert }) => {
    assert.deepEqual(await harness.runtime.memory(agentId), {})
    await harness.runtime.chat(agentId, {
      conversationId: 'c',
      messages: [{ role: 'user', content: '__remember__ color=blue' }],
    })
    assert.deepEqual(await harness.runtime.memory(agentId), { color: 'blue' })
  })

  test('the child environment holds none of the service secrets', async ({ assert }) => {
    const secretAgent = newId()
    const saved = { APP_KEY: process.env.APP_KEY, DATABASE_URL: process.env.DATABASE_URL }
    process.env.APP_KEY = 'service-app-key-must-not-leak'
    process.env.DATABASE_URL = 'postgres://secret:leak@127.0.0.1/never'
    process.env.MODEL_API_KEY = 'model-api-key-must-not-leak'
    try {
      await startReady(harness, secretAgent)
    } finally {
      process.env.APP_KEY = saved.APP_KEY
      process.env.DATABASE_URL = saved.DATABASE_URL
      delete process.env.MODEL_API_KEY
    }
    const info = await harness.runtime.status(secretAgent)
    const token = await tokenOf(harness, secretAgent)
    const answer = await fetch(`${info.baseUrl}/env`, {
      headers: { authorization: `Bearer ${token}` },
    })
    const env = (await answer.json()) as Record<string, string>
    const text = JSON.stringify(env)
    for (const name of ['APP_KEY', 'DATABASE_URL', 'MODEL_API_KEY', 'REDIS_URL', 'PORT']) {
      assert.notProperty(env, name)
    }
    assert.notInclude(text, 'must-not-leak')
    assert.notInclude(text, 'secret:leak')

    const paths = agentPaths(harness.agentsDir, secretAgent)
    assert.equal(env.HOME, paths.home)
    assert.equal(env.TMPDIR, paths.tmp)
    assert.equal(env.XDG_CACHE_HOME, paths.cache)
    assert.equal(env.XDG_CONFIG_HOME, paths.xdgConfig)
    assert.equal(env.AGENT_HOST_AGENT_ID, secretAgent)
    assert.equal(env.FIXTURE_WORKSPACE, paths.workspace)
    assert.match(env.PATH, /\/usr\/bin/)
    // Only what was built for it: the minimal base, the host's CA-bundle
    // variables when set, and what the plugin asked for.
    const trust = ['NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'SSL_CERT_DIR']
    for (const name of trust) assert.equal(env[name], process.env[name])
    // bubblewrap sets PWD to where it started the agent: its workspace.
    if (env.PWD !== undefined) assert.equal(env.PWD, paths.workspace)
    assert.sameMembers(
      Object.keys(env).filter(
        (name) => !name.startsWith('FIXTURE_') && !trust.includes(name) && name !== 'PWD'
      ),
      [
        'HOME',
        'TMPDIR',
        'TMP',
        'TEMP',
        'XDG_CONFIG_HOME',
        'XDG_DATA_HOME',
        'XDG_STATE_HOME',
        'XDG_CACHE_HOME',
        'LANG',
        'LC_ALL',
        'PATH',
        'AGENT_HOST_AGENT_ID',
      ]
    )
  }).timeout(20_000)
})

test.group('Runtime / process driver adoption', (group) => {
  let harness: RuntimeHarness
  group.each.setup(async () => {
    harness = await processHarness()
    return () => harness.cleanup()
  })

  test('a live agent is adopted by a restarted service and still supervised', async ({
    assert,
  }) => {
    const agentId = newId()
    const first = await startReady(harness, agentId)
    const pid = await pidOf(harness, agentId)

    await harness.restartService()
    // Before recovery the new service already sees it running from its record.
    const seen = await harness.runtime.status(agentId)
    assert.equal(seen.state, 'running')
    assert.equal(seen.containerId, first.containerId)

    const recovered = await harness.runtime.recover([fixtureSpec(agentId)])
    assert.deepEqual(recovered.adopted, [agentId])
    assert.deepEqual(recovered.started, [])
    const adopted = await harness.runtime.status(agentId)
    assert.equal(adopted.containerId, first.containerId)
    assert.equal(await pidOf(harness, agentId), pid, 'the same process')
    assert.include(await harness.runtime.logs(agentId), `adopted running process ${pid}`)

    const reply = await harness.runtime.chat(agentId, {
      conversationId: 'c',
      messages: [{ role: 'user', content: 'after adoption' }],
    })
    assert.equal(reply.content, 'echo: after adoption')
    const figures = await harness.runtime.monitoring(agentId)
    assert.isAbove(figures.memoryMb, 10)

    // A crash of the adopted process (not our child) is noticed through /proc and restarted.
    const token = await tokenOf(harness, agentId)
    await fetch(`${adopted.baseUrl}/crash`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    })
    await waitFor('the adopted crash to be restarted', async () => {
      const info = await harness.runtime.status(agentId)
      return info.state === 'running' && info.containerId !== first.containerId && info
    })
    await harness.runtime.waitUntilReady(agentId, { timeoutMs: 15_000 })
    const restarted = await harness.runtime.status(agentId)
    assert.equal(restarted.restartCount, 1)
    assert.notEqual(await pidOf(harness, agentId), pid)
  }).timeout(60_000)

  test('a dead process found at boot is cleaned up and started again', async ({ assert }) => {
    const agentId = newId()
    const first = await startReady(harness, agentId)
    const pid = await pidOf(harness, agentId)

    await harness.restartService()
    // The agent dies while no service watches it.
    process.kill(-pid, 'SIGKILL')
    await waitFor('the process to die', () => !isAlive(pid))
    assert.equal(await stateOf(harness, agentId), 'stopped')

    const recovered = await harness.runtime.recover([fixtureSpec(agentId)])
    assert.deepEqual(recovered.started, [agentId])
    await harness.runtime.waitUntilReady(agentId, { timeoutMs: 15_000 })
    const info = await harness.runtime.status(agentId)
    assert.notEqual(info.containerId, first.containerId)
    assert.notEqual(await pidOf(harness, agentId), pid)
  }).timeout(60_000)

  test('a recorded pid reused by another process is not adopted', async ({ assert }) => {
    const agentId = newId()
    await startReady(harness, agentId)
    const paths = agentPaths(harness.agentsDir, agentId)
    const record = (await readRecord(paths.recordFile))!
    await harness.restartService()
    // Pretend the agent's pid now belongs to this test process.
    const { writeRecord } = await import('#runtime/process/process_record')
    await harness.driver.stop(agentId)
    await writeRecord(paths.recordFile, { ...record, pid: process.pid })
    assert.equal(await stateOf(harness, agentId), 'stopped')
    const recovered = await harness.runtime.recover([fixtureSpec(agentId)])
    assert.deepEqual(recovered.started, [agentId])
    assert.notEqual(await pidOf(harness, agentId), process.pid)
  }).timeout(60_000)

  test('a process left without a record (crash between spawn and record) is killed, not doubled', async ({
    assert,
  }) => {
    const agentId = newId()
    await startReady(harness, agentId)
    const paths = agentPaths(harness.agentsDir, agentId)
    const pid = await pidOf(harness, agentId)
    await harness.restartService()
    // The crash came before the record was written: the process runs, nothing names it.
    const { deleteRecord } = await import('#runtime/process/process_record')
    await deleteRecord(paths.recordFile)

    const recovered = await harness.runtime.recover([fixtureSpec(agentId)])
    assert.deepEqual(recovered.started, [agentId])
    await harness.runtime.waitUntilReady(agentId, { timeoutMs: 15_000 })
    assert.isFalse(isAlive(pid), 'the stray was killed')
    assert.notEqual(await pidOf(harness, agentId), pid)
  }).timeout(60_000)

  test('a process whose folder a cut-short delete removed is killed by the boot sweep', async ({
    assert,
  }) => {
    const kept = newId()
    const deleted = newId()
    await startReady(harness, kept)
    await startReady(harness, deleted)
    const pid = await pidOf(harness, deleted)
    await harness.restartService()
    // The crash came after the delete removed the folder, before the process died:
    // no record and no folder name it any more.
    const { rm } = await import('node:fs/promises')
    await rm(agentPaths(harness.agentsDir, deleted).root, { recursive: true, force: true })
    assert.isTrue(isAlive(pid))

    const recovered = await harness.runtime.recover([fixtureSpec(kept)])
    assert.include(recovered.swept, deleted)
    assert.deepEqual(recovered.adopted, [kept])
    assert.isFalse(isAlive(pid), 'the process of the deleted agent was killed')
    assert.isTrue(await harness.runtime.isRunning(kept))
  }).timeout(60_000)
})
