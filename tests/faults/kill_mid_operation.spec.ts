import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { test } from '@japa/runner'
import type { Assert } from '@japa/assert'
import { agentProcesses } from '#tests/helpers/agent_processes'
import { startModelUpstream, type ModelUpstream } from '#tests/helpers/model_upstream'
import { waitFor } from '#tests/helpers/processes'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'

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
  /** Agents of other servers (the test run's own) running before this group. */
  let foreign: Set<string>

  group.setup(async () => {
    foreign = new Set(agentProcesses().keys())
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

  function agentLog(id: string) {
    try {
      return readFileSync(
        join(service.storage, 'agents', id, 'runtime', 'output.log'),
        'utf8'
      ).slice(-3000)
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
        throw new Error(
          `${error.message} (${step}); ` +
            `processes ${JSON.stringify(agentProcesses().get(id))}; ` +
            `its log:\n${agentLog(id)}\nthe service said:\n${service.server.output().slice(-4000)}`
        )
      })
    }
    // A process of a deleted (or never stored) agent would show here.
    const running = await waitFor(
      async () => {
        const ours = [...agentProcesses()].filter(([id]) => !foreign.has(id))
        return ours.every(([id]) => ids.includes(id)) ? ours : undefined
      },
      { timeoutMs: 15_000, what: 'no agent process without an agent' }
    ).catch(() => [...agentProcesses()].filter(([id]) => !foreign.has(id)))
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
    const perAgent = agentProcesses().get(reference)?.length ?? 0
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

  test('open SSE and WebSocket chats end for their clients when the service dies', async ({
    assert,
  }) => {
    const token = await service.signUp()
    const agentId = await service.createFixtureAgent(token, 'Chatty')
    // Stopped: the reply comes from the hosted path, token by token from the stand-in model.
    await service.call(`/agents/${agentId}/stop`, { method: 'POST', token })
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
  }).timeout(120_000)
})
