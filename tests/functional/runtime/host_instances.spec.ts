import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { ioUringFilterProgram } from '#runtime/process/seccomp'
import { FakeTelegram } from '#tests/helpers/fake_telegram'
import { startHostInstances, type HostInstances } from '#tests/helpers/host_instances'
import { waitFor } from '#tests/helpers/processes'
import type { ServiceUnderFault } from '#tests/helpers/service_under_fault'

/**
 * Two instances of the service on one host (docs/runtime.md "Many
 * machines"): the same STORAGE_DIR, database and Redis, each its own
 * server process and port, requests reaching either.
 */
test.group('Instances on one host (process driver): shared files', (group) => {
  let host: HostInstances
  group.setup(async () => {
    host = await startHostInstances(2)
    return () => host.destroy()
  })

  test('agents created through both instances at once all run; the files they share are whole', async ({
    assert,
  }) => {
    const [a, b] = host.instances
    const token = await host.account()
    // Four first starts at once on a fresh storage: both instances write the sandbox's
    // seccomp file, the agents' records and tokens at the same moment.
    const through = [a, b, a, b]
    const ids = await Promise.all(
      through.map((instance, index) => instance.createFixtureAgent(token, `Shared ${index}`))
    )
    for (const [index, id] of ids.entries()) {
      await through[index].waitUntilRunning(token, id, 60_000)
    }

    const sandbox = join(host.storage, 'runtime', 'sandbox')
    const bpf = readFileSync(join(sandbox, `no-io-uring-${process.arch}.bpf`))
    assert.isTrue(bpf.equals(ioUringFilterProgram()!), 'the seccomp filter is whole')
    assert.deepEqual(
      readdirSync(sandbox),
      [`no-io-uring-${process.arch}.bpf`],
      'nothing staged left'
    )
    for (const id of ids) {
      const runtime = join(host.storage, 'agents', '.runtime', id)
      const credentials = JSON.parse(readFileSync(join(runtime, 'credentials.json'), 'utf8'))
      assert.lengthOf(credentials.gatewayToken, 48)
      const record = JSON.parse(readFileSync(join(runtime, 'process.json'), 'utf8'))
      assert.equal(record.agentId, id)
      assert.notInclude(readdirSync(runtime).join(' '), '.partial')
    }
    for (const instance of host.instances) {
      assert.notMatch(instance.server.output(), /ENOENT|EEXIST|ENOTEMPTY/)
    }
  }).timeout(240_000)
})

/** Separate process trees among `pids`: the members whose parent is not one of them. */
function treesOf(pids: number[]): number[] {
  const members = new Set(pids)
  return pids.filter((pid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      return !members.has(ppid)
    } catch {
      return false
    }
  })
}

/** The pid (in its instance id) of the instance holding the agent's lease, if one does. */
async function holderPid(host: HostInstances, agentId: string): Promise<number | undefined> {
  const [row] = await host.query(
    `select holder from runtime_leases where name = $1 and expires_at > now()`,
    [`agent:${agentId}`]
  )
  return row ? Number(String(row.holder).split(':')[1]) : undefined
}

/** What `__count__` answered: the fixture's in-memory count and its pid. */
function counted(text: string): { count: number; pid: number } {
  const match = /count (\d+) since \d+ pid (\d+)/.exec(text)
  if (!match) throw new Error(`not a count: ${text}`)
  return { count: Number(match[1]), pid: Number(match[2]) }
}

test.group('Instances on one host (process driver): one agent, any instance', (group) => {
  let host: HostInstances
  let token: string
  let key: string
  group.setup(async () => {
    host = await startHostInstances(2)
    token = await host.account()
    const created = await host.instances[0].call('/auth/api-keys', {
      method: 'POST',
      token,
      json: { label: 'host instances' },
    })
    key = created.body.data.key
    return () => host.destroy()
  })

  /** One programmatic chat through `instance`; the reply's text. */
  async function chat(instance: ServiceUnderFault, agentId: string, message: string) {
    const answer = await instance.call(`/api/v1/agents/${agentId}/chat`, {
      method: 'POST',
      token: key,
      json: { message },
      timeoutMs: 30_000,
    })
    if (answer.status !== 200) throw new Error(`chat: ${JSON.stringify(answer)}`)
    return JSON.stringify(answer.body.data)
  }

  /** Its pids, once it runs as one process tree, and the instance holding it. */
  async function runningOnce(agentId: string) {
    for (const instance of host.instances) {
      const { exitCode, signalCode } = instance.server.child
      if (exitCode === null && !signalCode) await instance.waitUntilRunning(token, agentId, 60_000)
    }
    const pids = host.agentProcesses().get(agentId) ?? []
    return { pids, trees: treesOf(pids), holder: await holderPid(host, agentId) }
  }

  async function treesNow(agentId: string) {
    const { trees } = await runningOnce(agentId)
    return trees
  }

  test('an agent started through one instance is served by the other: status, chat, stream, socket, files, logs', async ({
    assert,
  }) => {
    const [a, b] = host.instances
    const agentId = await a.createFixtureAgent(token, 'Served anywhere')
    const first = await runningOnce(agentId)
    assert.lengthOf(first.trees, 1, 'one process tree')
    assert.equal(first.holder, a.server.child.pid, 'held by the instance that started it')

    // The same process answers through both: its in-memory count goes on.
    const one = counted(await chat(a, agentId, '__count__'))
    const two = counted(await chat(b, agentId, '__count__'))
    assert.equal(two.pid, one.pid)
    assert.equal(two.count, one.count + 1)

    const stream = await b.openChatStream(token, agentId, '__count__')
    assert.equal(stream.status, 200)
    const events = await stream.text()
    const tokens = [...events.matchAll(/^data: (\{.*\})$/gm)]
      .map((line) => JSON.parse(line[1]).token ?? '')
      .join('')
    assert.include(tokens, `count ${one.count + 2}`)

    const { ws, messages } = await b.openChatSocket(token, agentId)
    ws.send(JSON.stringify({ type: 'chat', payload: { message: '__count__' } }))
    await waitFor(
      async () => (messages.join('').includes(`count ${one.count + 3}`) ? true : undefined),
      {
        what: 'the socket reply',
      }
    )
    ws.close()

    const written = await b.call(`/agents/${agentId}/container-files`, {
      method: 'PUT',
      token,
      json: { path: '/notes/from-b.txt', content: 'written through b' },
    })
    assert.equal(written.status, 200, JSON.stringify(written.body))
    const read = await a.call(
      `/agents/${agentId}/container-files/read?path=${encodeURIComponent('/notes/from-b.txt')}`,
      { token }
    )
    assert.equal(read.body.data.content, 'written through b')

    const logs = await b.call(`/agents/${agentId}/logs?tail=200`, { token })
    assert.equal(logs.status, 200)
    const text = JSON.stringify(logs.body)
    assert.include(text, 'message=__count__')
    const credentials = readFileSync(
      join(host.storage, 'agents', '.runtime', agentId, 'credentials.json'),
      'utf8'
    )
    assert.notInclude(text, JSON.parse(credentials).gatewayToken, 'no gateway token in its logs')

    const status = await b.call(`/agents/${agentId}/status`, { token })
    assert.equal(status.body.data.container, 'running')
    assert.equal(status.body.data.phase, 'running')
    const monitoring = await b.call(`/agents/${agentId}/monitoring`, { token })
    assert.equal(monitoring.status, 200, JSON.stringify(monitoring.body))
    assert.isAbove(monitoring.body.data.memoryMb, 0)
    assert.deepEqual(host.agentProcesses().get(agentId), first.pids, 'nothing else was started')
  }).timeout(180_000)

  test('stop, start and restart through either instance; starts racing on both boot once', async ({
    assert,
  }) => {
    const [a, b] = host.instances
    const agentId = await a.createFixtureAgent(token, 'Started anywhere')
    await runningOnce(agentId)

    const stopped = await b.call(`/agents/${agentId}/stop`, { method: 'POST', token })
    assert.equal(stopped.status, 200)
    await waitFor(async () => (host.agentProcesses().has(agentId) ? undefined : true), {
      what: 'the agent to stop',
    })
    // A stopped agent is held by nobody (released once its stop is done).
    await waitFor(async () => ((await holderPid(host, agentId)) === undefined ? true : undefined), {
      what: 'its lease to be released',
    })

    // Both instances asked to start it at once: one process tree.
    const starts = await Promise.all(
      [a, b].map((instance) => instance.call(`/agents/${agentId}/start`, { method: 'POST', token }))
    )
    for (const start of starts) assert.equal(start.status, 200, JSON.stringify(start.body))
    const started = await runningOnce(agentId)
    assert.lengthOf(started.trees, 1, 'booted once')

    const holder = host.instances.find((instance) => instance.server.child.pid === started.holder)!
    const other = host.instances.find((instance) => instance !== holder)!
    const restarted = await other.call(`/agents/${agentId}/restart`, { method: 'POST', token })
    assert.equal(restarted.status, 200, JSON.stringify(restarted.body))
    // The new run's id is answered at once (scheduled); it runs once the old run is gone.
    await waitFor(
      async () => {
        const pids = host.agentProcesses().get(agentId) ?? []
        const fresh = pids.length > 0 && !pids.some((pid) => started.pids.includes(pid))
        const status = await other.call(`/agents/${agentId}/status`, { token })
        const running = status.body.data.container === 'running'
        return fresh && running && status.body.data.containerId === restarted.body.data.containerId
          ? true
          : undefined
      },
      { timeoutMs: 60_000, what: 'the restarted run' }
    )
    assert.lengthOf(await treesNow(agentId), 1)
  }).timeout(180_000)

  test('an instance killed with SIGKILL: the other adopts its agents within 30 s, nothing boots again', async ({
    assert,
  }) => {
    const [a, b] = host.instances
    const agentId = await a.createFixtureAgent(token, 'Adopted')
    const before = await runningOnce(agentId)
    assert.equal(before.holder, a.server.child.pid)
    const counted1 = counted(await chat(a, agentId, '__count__'))

    const killedAt = Date.now()
    await a.kill9()
    await waitFor(
      async () => ((await holderPid(host, agentId)) === b.server.child.pid ? true : undefined),
      {
        timeoutMs: 30_000,
        what: 'the surviving instance to take the lease',
      }
    )
    await b.waitUntilRunning(token, agentId, 30_000 - (Date.now() - killedAt))
    console.log(`    adopted and answering ${Date.now() - killedAt} ms after the kill`)
    const counted2 = counted(await chat(b, agentId, '__count__'))
    assert.equal(counted2.pid, counted1.pid, 'the same process: kept running')
    assert.equal(counted2.count, counted1.count + 1)
    assert.deepEqual(host.agentProcesses().get(agentId), before.pids, 'nothing booted')

    // It supervises what it adopted: a crash is restarted by it.
    await chat(b, agentId, '__crash__').catch(() => undefined)
    await waitFor(
      async () => {
        // A new tree: none of the old one's processes (its launcher outlives the framework a moment).
        const pids = host.agentProcesses().get(agentId) ?? []
        return pids.length > 0 && !pids.some((pid) => before.pids.includes(pid)) ? true : undefined
      },
      { timeoutMs: 30_000, what: 'the crash restart' }
    )
    await b.waitUntilRunning(token, agentId, 30_000)
    assert.lengthOf(await treesNow(agentId), 1)

    // The killed instance comes back on the same storage: it leaves the agent to its holder.
    await a.restart()
    await new Promise((resolve) => setTimeout(resolve, 6_000))
    assert.equal(await holderPid(host, agentId), b.server.child.pid)
    assert.lengthOf(await treesNow(agentId), 1)
  }).timeout(240_000)

  test('a clean SIGTERM of one instance hands its agents over: they keep running', async ({
    assert,
  }) => {
    const [a, b] = host.instances
    const agentId = await b.createFixtureAgent(token, 'Handed over')
    const before = await runningOnce(agentId)
    assert.equal(before.holder, b.server.child.pid)

    await b.destroy()
    await waitFor(
      async () => ((await holderPid(host, agentId)) === a.server.child.pid ? true : undefined),
      {
        timeoutMs: 30_000,
        what: 'the other instance to take the lease',
      }
    )
    await a.waitUntilRunning(token, agentId, 30_000)
    assert.deepEqual(host.agentProcesses().get(agentId), before.pids, 'the same processes')
    await b.restart()
  }).timeout(180_000)
})

test.group('Instances on one host (process driver): a channel connection', (group) => {
  let host: HostInstances
  let telegram: FakeTelegram
  group.setup(async () => {
    telegram = await new FakeTelegram().start()
    host = await startHostInstances(2, { TELEGRAM_API_URL: telegram.url })
    return async () => {
      await host.destroy()
      await telegram.close()
    }
  })

  /** Which instance (by pid) holds the bot's connection, and what each instance says of it. */
  async function seen(agentId: string, token: string) {
    const [row] = await host.query(
      `select holder, state from agent_channels where agent_id = $1 and channel = 'telegram'`,
      [agentId]
    )
    const statuses = []
    for (const instance of host.instances) {
      const { exitCode, signalCode } = instance.server.child
      if (exitCode !== null || signalCode) continue
      const answer = await instance.call(`/agents/${agentId}/channel-status`, { token })
      statuses.push(answer.body.data?.telegram?.state)
    }
    return { holder: row?.holder ? Number(String(row.holder).split(':')[1]) : undefined, statuses }
  }

  test('a bot is polled by one instance, shows connected through both, and moves when its holder dies', async ({
    assert,
  }) => {
    const [a, b] = host.instances
    const jwt = await host.account()
    const agentId = await a.createFixtureAgent(jwt, 'Channel agent')
    await a.waitUntilRunning(jwt, agentId, 60_000)
    const bot = telegram.addBot('host_bot')
    const patched = await b.call(`/agents/${agentId}`, {
      method: 'PATCH',
      token: jwt,
      json: { config: { channels: { telegram: { botToken: bot } } } },
    })
    assert.equal(patched.status, 200, JSON.stringify(patched.body))

    const connected = async () => {
      const now = await seen(agentId, jwt)
      return now.statuses.every((state) => state === 'connected') && now.holder ? now : undefined
    }
    const first = await waitFor(connected, { timeoutMs: 30_000, what: 'the bot to connect' })
    const pids = host.instances.map((instance) => instance.server.child.pid)
    assert.isTrue(pids.includes(first.holder), 'one of the two holds it')

    telegram.userSays(bot, 'hello over telegram')
    await waitFor(async () => (telegram.repliesTo(bot, 4242).length > 0 ? true : undefined), {
      timeoutMs: 30_000,
      what: 'the reply',
    })
    await new Promise((resolve) => setTimeout(resolve, 6_000))
    assert.lengthOf(telegram.repliesTo(bot, 4242), 1, 'answered once')
    assert.equal(telegram.bot(bot).conflicts, 0, 'never two pollers')

    // Its holder dies: the other instance takes the connection over.
    const holder = host.instances.find((instance) => instance.server.child.pid === first.holder)!
    const survivor = host.instances.find((instance) => instance !== holder)!
    const killedAt = Date.now()
    await holder.kill9()
    const moved = await waitFor(
      async () => {
        const now = await connected()
        return now?.holder === survivor.server.child.pid ? now : undefined
      },
      { timeoutMs: 40_000, what: 'the survivor to hold the bot' }
    )
    console.log(`    telegram connected again ${Date.now() - killedAt} ms after its holder's kill`)
    assert.deepEqual(moved.statuses, ['connected'])
    telegram.userSays(bot, 'still there?')
    await waitFor(async () => (telegram.repliesTo(bot, 4242).length > 1 ? true : undefined), {
      timeoutMs: 30_000,
      what: 'the second reply',
    })
    assert.include(telegram.repliesTo(bot, 4242)[1].text, 'still there?')
    await holder.restart()
  }).timeout(240_000)
})

test.group('Instances on one host (process driver): one capacity book', (group) => {
  let host: HostInstances
  group.setup(async () => {
    // Two fixture agents (256 MB each) fit the host's budget, a third does not; one boot at a time.
    host = await startHostInstances(2, {
      AGENT_MEMORY_BUDGET_MB: '600',
      AGENT_BOOT_CONCURRENCY: '1',
    })
    return () => host.destroy()
  })

  test("the memory budget is the host's: a third agent waits, and a message makes room on the other instance", async ({
    assert,
  }) => {
    const [a, b] = host.instances
    const token = await host.account()
    const running = () => [...host.agentProcesses().keys()]
    let most = 0
    const sampler = setInterval(() => (most = Math.max(most, running().length)), 100)
    try {
      // Y on b first (the least recently active), then X on a.
      const y = await b.createFixtureAgent(token, 'Y on b')
      await b.waitUntilRunning(token, y, 60_000)
      const x = await a.createFixtureAgent(token, 'X on a')
      await a.waitUntilRunning(token, x, 60_000)

      // Z through a: a alone would see room for it (X and Z: 512 MB); the host has none.
      const z = await a.createFixtureAgent(token, 'Z on a')
      for (const instance of host.instances) {
        await waitFor(
          async () => {
            const status = await instance.call(`/agents/${z}/status`, { token })
            return status.body.data.container === 'queued' ? status.body.data : undefined
          },
          { timeoutMs: 20_000, what: 'Z to wait in the host queue' }
        )
      }
      await new Promise((resolve) => setTimeout(resolve, 2_000))
      assert.sameMembers(running(), [x, y], 'a pre-boot never puts an agent to sleep')

      // A message for Z makes its start interactive: the host's least recently active agent
      // (Y, on the other instance) is put to sleep for it.
      const chatted = await a.call(`/agents/${z}/chat/stream`, {
        method: 'POST',
        token,
        json: { message: 'wake up' },
      })
      assert.equal(chatted.status, 200)
      await a.waitUntilRunning(token, z, 60_000)
      const ySeen = await b.call(`/agents/${y}/status`, { token })
      assert.equal(ySeen.body.data.container, 'sleeping')
      assert.sameMembers(running(), [x, z])
      assert.isAtMost(most, 2, 'never more agents than the host budget holds')
    } finally {
      clearInterval(sampler)
    }
  }).timeout(240_000)
})

test.group('Instances on one host (process driver): one boot queue', (group) => {
  let host: HostInstances
  group.setup(async () => {
    host = await startHostInstances(2, { AGENT_BOOT_CONCURRENCY: '1' })
    return () => host.destroy()
  })

  test("the boot slots are the host's: while one instance's agent boots, the other's waits, first in line", async ({
    assert,
  }) => {
    const [a, b] = host.instances
    const token = await host.account()
    const create = async (instance: ServiceUnderFault, name: string, readyDelayMs: number) => {
      const created = await instance.call('/agents', {
        method: 'POST',
        token,
        json: { name, framework: 'fixture', config: { readyDelayMs } },
      })
      if (created.status !== 201) throw new Error(`create agent: ${JSON.stringify(created)}`)
      return created.body.data.id as string
    }
    const phaseOf = async (instance: ServiceUnderFault, agentId: string) => {
      const status = await instance.call(`/agents/${agentId}/status`, { token })
      return status.body.data
    }
    // The first holds the host's only boot slot for 8 s (its readiness answers late).
    const first = await create(a, 'Slow boot on a', 8_000)
    await waitFor(
      async () => {
        const { phase } = await phaseOf(a, first)
        return phase === 'booting' ? true : undefined
      },
      { what: 'the first agent to boot' }
    )
    const second = await create(b, 'Waiting on b', 0)
    const waiting = await waitFor(
      async () => {
        const status = await phaseOf(a, second)
        return status.container === 'queued' ? status : undefined
      },
      { timeoutMs: 10_000, what: 'the second to wait for the slot' }
    )
    assert.equal(waiting.queuePosition, 1)
    const { phase } = await phaseOf(a, first)
    assert.equal(phase, 'booting', 'the first still holds the slot')
    await b.waitUntilRunning(token, second, 60_000)
    const { container } = await phaseOf(b, first)
    assert.equal(container, 'running', 'the first is running too')
  }).timeout(180_000)
})
