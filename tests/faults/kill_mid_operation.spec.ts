import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { test } from '@japa/runner'
import type { Assert } from '@japa/assert'
import { agentProcesses } from '#tests/helpers/agent_processes'
import { startModelUpstream, type ModelUpstream } from '#tests/helpers/model_upstream'
import { waitFor } from '#tests/helpers/processes'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'
import { agentPaths } from '#runtime/agent_paths'

/**
 * kill -9 of the service at points spread over an agent create, a delete,
 * a config change and open SSE and WebSocket chats. After each restart:
 * no agent is lost or doubled, every agent that exists runs exactly once,
 * no agent process outlives its agent, a config is either the old or the
 * new one, and chat clients see their connection end instead of hanging.
 */
const KILL_AFTER_MS = [0, 10, 30, 80, 200]

test.group('Fault: the service is killed (-9) in the middle of an operation', (group) => {
  let upstream: ModelUpstream
  let service: ServiceUnderFault

  group.setup(async () => {
    upstream = await startModelUpstream()
    service = await startServiceUnderFault({
      MODEL_API_URL: upstream.baseUrl,
      MODEL_API_KEY: 'sk-fault-test',
      MODEL_NAME: 'fault-model',
      LOG_LEVEL: 'info',
    })
    return async () => {
      await service.destroy()
      await upstream.close()
    }
  })

  /** This service's agents only (other test runs may run agents on the machine too). */
  const ourAgentProcesses = () => agentProcesses(service.storage)

  function agentLog(id: string) {
    try {
      return readFileSync(agentPaths(join(service.storage, 'agents'), id).logFile, 'utf8').slice(
        -3000
      )
    } catch (error) {
      return String(error)
    }
  }

  async function agentsNamed(token: string, name: string): Promise<any[]> {
    const listed = await service.call('/agents', { token })
    return (listed.body.data.agents as any[]).filter((agent) => agent.name === name)
  }

  /** Each agent that exists runs exactly `perAgent` processes once it is up; no other agent of ours runs. */
  async function assertConsistent(assert: Assert, token: string, perAgent: number, step: string) {
    const listed = await service.call('/agents', { token })
    const ids = (listed.body.data.agents as any[]).map((agent) => agent.id as string)
    for (const id of ids) {
      await service.waitUntilRunning(token, id).catch((error: Error) => {
        // Its log's end on the first line too: a run's summary shows only a failure's first lines.
        const ending = agentLog(id).trim().split('\n').slice(-6).join(' / ').slice(-500)
        throw new Error(
          `${error.message} (${step}); its log ends: ${ending}; ` +
            `processes ${JSON.stringify(ourAgentProcesses().get(id))}; ` +
            `its log:\n${agentLog(id)}\nthe service said:\n${service.server.output().slice(-4000)}`
        )
      })
    }
    // A process of a deleted (or never stored) agent would show here.
    const running = await waitFor(
      async () => {
        const ours = [...ourAgentProcesses()]
        return ours.every(([id]) => ids.includes(id)) ? ours : undefined
      },
      { timeoutMs: 15_000, what: 'no agent process without an agent' }
    ).catch(() => [...ourAgentProcesses()])
    assert.sameMembers(
      running.map(([id]) => id),
      ids,
      `${step}: exactly the stored agents have processes`
    )
    for (const [id, pids] of running) {
      assert.lengthOf(pids, perAgent, `${step}: agent ${id} runs once (pids ${pids.join(', ')})`)
    }
  }

  async function killAfter(ms: number, request: Promise<unknown>) {
    await sleep(ms)
    await service.kill9()
    await request
    await service.restart()
  }

  test('agent create, config change and delete: nothing lost, doubled or left running', async ({
    assert,
  }) => {
    const token = await service.signUp()
    // What one agent runs when nothing went wrong.
    const reference = await service.createFixtureAgent(token, 'Reference')
    await service.waitUntilRunning(token, reference)
    await sleep(500)
    const perAgent = ourAgentProcesses().get(reference)?.length ?? 0
    assert.isAbove(perAgent, 0)
    const referenceRemoved = await service.call(`/agents/${reference}`, {
      method: 'DELETE',
      token,
    })
    assert.equal(referenceRemoved.status, 200)

    const failedCalls = (error: Error) => error
    for (const [round, ms] of KILL_AFTER_MS.entries()) {
      const name = `Killed ${round}`
      await killAfter(
        ms,
        service
          .call('/agents', { method: 'POST', token, json: { name, framework: 'fixture' } })
          .catch(failedCalls)
      )
      const created = await agentsNamed(token, name)
      assert.isAtMost(created.length, 1, `create killed after ${ms} ms stored the agent once`)
      await assertConsistent(assert, token, perAgent, `create killed after ${ms} ms`)
      const agentId =
        created[0]?.id ?? (await service.createFixtureAgent(token, name).then((id) => id))

      const before = await service.call(`/agents/${agentId}`, { token })
      const personality = `Changed in round ${round}`
      await killAfter(
        ms,
        service
          .call(`/agents/${agentId}`, { method: 'PATCH', token, json: { personality } })
          .catch(failedCalls)
      )
      const after = await service.call(`/agents/${agentId}`, { token })
      assert.include(
        [before.body.data.personality, personality],
        after.body.data.personality,
        'a config is the old one or the new one'
      )
      await assertConsistent(assert, token, perAgent, `change killed after ${ms} ms`)

      await killAfter(
        ms,
        service.call(`/agents/${agentId}`, { method: 'DELETE', token }).catch(failedCalls)
      )
      const left = await service.call(`/agents/${agentId}`, { token })
      assert.include([200, 404], left.status)
      await assertConsistent(assert, token, perAgent, `delete killed after ${ms} ms`)
      if (left.status === 200) {
        const removed = await service.call(`/agents/${agentId}`, { method: 'DELETE', token })
        assert.equal(removed.status, 200)
      }
    }
    await assertConsistent(assert, token, perAgent, 'the end')
  }).timeout(600_000)

  test('open SSE and WebSocket chats end for their clients when the service dies; their held credits come back', async ({
    assert,
  }) => {
    const { token, email } = await service.signUpAccount()
    const agentId = await service.createFixtureAgent(token, 'Chatty')
    // Stopped: the reply comes from the hosted path, token by token from the stand-in model.
    await service.call(`/agents/${agentId}/stop`, { method: 'POST', token })
    const balanceOf = async () => {
      const answer = await service.call('/ai-credits/balance', { token })
      return answer.body.data.balance as number
    }
    const before = await balanceOf()
    const startedAt = new Date()
    const openHolds = () =>
      service.query(
        'select h.id from chat_credit_holds h join users u on u.id = h.user_id where u.email = $1',
        [email]
      )

    // Streamed token by token, or (the WebSocket's whole reply) after a long think.
    upstream.set({
      reply: 'one two three four five six seven eight',
      tokenDelayMs: 2_000,
      replyDelayMs: 60_000,
    })

    const sse = await service.openChatStream(token, agentId, 'Count slowly')
    assert.equal(sse.status, 200)
    const reader = sse.body!.getReader()
    const first = await reader.read()
    assert.isFalse(first.done)

    const {
      ws,
      closed: wsClosed,
      messages: wsMessages,
    } = await service.openChatSocket(token, agentId)
    ws.send(JSON.stringify({ type: 'chat', payload: { message: 'Count slowly too' } }))
    await waitFor(async () => (upstream.inFlight >= 2 ? true : undefined), {
      timeoutMs: 10_000,
      what: 'both chats to reach the model',
    }).catch((error: Error) => {
      throw new Error(`${error.message}; the socket said ${wsMessages.join(' | ')}`)
    })
    assert.lengthOf(await openHolds(), 2, 'each chat holds credits while the model works')

    await service.kill9()
    const killedAt = Date.now()
    const sseEnd = (async () => {
      try {
        for (;;) {
          const chunk = await reader.read()
          if (chunk.done) return 'closed'
        }
      } catch {
        return 'error'
      }
    })()
    const [sseOutcome, wsCode] = await Promise.all([
      Promise.race([sseEnd, sleep(10_000).then(() => 'hang')]),
      Promise.race([wsClosed, sleep(10_000).then(() => -1)]),
    ])
    console.log(
      `    kill -9 mid-stream: SSE client saw "${sseOutcome}", WebSocket closed with ${wsCode}, ${Date.now() - killedAt} ms after the kill`
    )
    assert.include(['closed', 'error'], sseOutcome)
    assert.equal(wsCode, 1006, 'an abnormal close, seen at once')
    await service.restart()

    // Both chats held credits when the service died; after the restart they come back,
    // less only what the ledger charged (nothing settled: the replies never ended).
    let last: unknown
    await waitFor(
      async () => {
        const holds = await openHolds()
        last = { holds: holds.length, balance: await balanceOf() }
        return holds.length === 0 ? true : undefined
      },
      { timeoutMs: 30_000, what: 'the chats’ credit holds to be returned' }
    ).catch((error: Error) => {
      throw new Error(`${error.message}: ${JSON.stringify(last)}, ${before} before the chats`)
    })
    const ledger = await service.query(
      `select l.kind, l.credits from credit_ledger l join users u on u.id = l.user_id
        where u.email = $1 and l.created_at >= $2`,
      [email, startedAt]
    )
    const charged = ledger.reduce((sum, row) => sum + Number(row.credits), 0)
    console.log(
      `    kill -9 mid-stream: credits back ${Date.now() - killedAt} ms after the kill (restart included); ${-charged} charged`
    )
    assert.equal(
      await balanceOf(),
      before + charged,
      'held credits back, less only what was charged'
    )
    assert.isAtMost(charged, 0)
  }).timeout(120_000)

  test('a workspace file being written when the service dies is the old one or the new one and never partial', async ({
    assert,
  }) => {
    const token = await service.signUp()
    const agentId = await service.createFixtureAgent(token, 'Writer')
    await service.waitUntilRunning(token, agentId)
    const path = 'notes/big.txt'
    // Near the 1,000,000-character limit: the write itself takes a while.
    const version = (n: number) => String.fromCharCode(97 + (n % 26)).repeat(999_000)
    const put = (content: string) =>
      service.call(`/agents/${agentId}/container-files`, {
        method: 'PUT',
        token,
        json: { path, content },
        timeoutMs: 60_000,
      })
    const read = () =>
      service.call(`/agents/${agentId}/container-files/read?path=${encodeURIComponent(path)}`, {
        token,
      })
    const first = await put(version(0))
    assert.equal(first.status, 200, JSON.stringify(first.body))
    // How long a whole write takes, warm: the file is written at its very end.
    let fullMs = Number.POSITIVE_INFINITY
    for (let i = 0; i < 3; i++) {
      const started = Date.now()
      await put(version(0))
      fullMs = Math.min(fullMs, Date.now() - started)
    }
    let current = 0
    const outcomes: string[] = []
    // Kills spread over the end of a write, where the file is written.
    for (const [round, fraction] of [0.7, 0.9, 1].entries()) {
      const next = round + 1
      await killAfter(
        Math.round(fullMs * fraction),
        put(version(next)).catch((error) => error)
      )
      await service.waitUntilRunning(token, agentId)
      const stored = await read()
      assert.equal(stored.status, 200, JSON.stringify(stored.body).slice(0, 300))
      const content = stored.body.data.content as string
      assert.include(
        [version(current), version(next)],
        content,
        `round ${round}: the whole old or the whole new content (got ${content.length} characters)`
      )
      outcomes.push(content === version(next) ? 'new' : 'old')
      if (content === version(next)) current = next
      const listed = await service.call(`/agents/${agentId}/container-files?path=/notes`, { token })
      assert.deepEqual(
        (listed.body.data.files as any[]).map((file) => file.name),
        ['big.txt'],
        'no staging leftover listed'
      )
    }
    // What a cut write left on disk (hidden from listings, never read as the file).
    const staged = readdirSync(
      join(service.storage, 'agents', agentId, 'workspace', 'notes')
    ).filter((name) => name.endsWith('.partial'))
    console.log(
      `    kill -9 mid-write of a ${version(0).length}-character file (a write takes ${fullMs} ms): ` +
        `${outcomes.join(', ')}; ${staged.length} staged copies left on disk`
    )
  }).timeout(300_000)
})
