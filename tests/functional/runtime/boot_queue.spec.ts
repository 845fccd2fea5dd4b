import { test } from '@japa/runner'
import { waitFor } from '#tests/helpers/processes'
import { startModelUpstream, type ModelUpstream } from '#tests/helpers/model_upstream'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'

/** Long enough that the first agent holds the only boot slot while the test sets the queue up. */
const HOLD_SLOT_MS = 20_000
/** The second account's agent holds the slot long enough to be seen booting. */
const SEEN_BOOTING_MS = 6_000

interface Status {
  container: string
  phase: string
  queuePosition: number | null
}

/**
 * The fair boot queue through the real server (app/runtime/capacity):
 * one boot slot (AGENT_BOOT_CONCURRENCY=1) held by a fixture agent that
 * answers its readiness path late (`readyDelayMs`). Account A's further
 * agents wait as background pre-boots; account B's one agent, sent a
 * message, goes before them.
 */
test.group('Boot queue: accounts and interactive starts (process driver)', (group) => {
  let service: ServiceUnderFault
  let upstream: ModelUpstream
  group.setup(async () => {
    upstream = await startModelUpstream()
    service = await startServiceUnderFault({
      MODEL_API_URL: upstream.baseUrl,
      MODEL_API_KEY: 'sk-boot-queue-test',
      MODEL_NAME: 'boot-queue-model',
      AGENT_BOOT_CONCURRENCY: '1',
    })
    return async () => {
      await service.destroy()
      await upstream.close()
    }
  })

  async function createAgent(token: string, name: string, readyDelayMs: number) {
    const created = await service.call('/agents', {
      method: 'POST',
      token,
      json: { name, framework: 'fixture', config: { readyDelayMs } },
    })
    if (created.status !== 201) throw new Error(`create agent: ${JSON.stringify(created)}`)
    return created.body.data.id as string
  }

  async function statusOf(token: string, agentId: string): Promise<Status> {
    const answer = await service.call(`/agents/${agentId}/status`, { token })
    return answer.body.data
  }

  /** Resolves once the agent's status has `field` at `value`. */
  async function waitForStatus<K extends keyof Status>(
    token: string,
    agentId: string,
    field: K,
    value: Status[K],
    what: string
  ) {
    await waitFor(
      async () => {
        const status = await statusOf(token, agentId)
        return status[field] === value ? true : undefined
      },
      { timeoutMs: 30_000, what }
    )
  }

  async function positionOf(token: string, agentId: string) {
    const status = await statusOf(token, agentId)
    return status.queuePosition
  }

  test("one account's burst of creates does not hold another account's first agent back", async ({
    assert,
  }) => {
    // Account A may hold several agents (founding_member: 10).
    const a = await service.signUpAccount()
    await service.query(`update users set tier = 'founding_member' where email = $1`, [a.email])
    const holder = await createAgent(a.token, 'Holder', HOLD_SLOT_MS)
    await waitForStatus(a.token, holder, 'phase', 'booting', 'the first agent to take the slot')
    const burst: string[] = []
    for (let index = 0; index < 3; index++) {
      burst.push(await createAgent(a.token, `Burst ${index}`, SEEN_BOOTING_MS))
    }
    for (const agentId of burst) {
      await waitForStatus(
        a.token,
        agentId,
        'container',
        'queued',
        `burst agent ${agentId} to queue`
      )
    }
    assert.deepEqual(
      await Promise.all(burst.map((agentId) => positionOf(a.token, agentId))),
      [1, 2, 3],
      "A's pre-boots wait in the order they were created"
    )

    const b = await service.signUp()
    const first = await createAgent(b, 'First of B', SEEN_BOOTING_MS)
    await waitForStatus(b, first, 'container', 'queued', "B's agent to queue")
    // Its first message: answered on the hosted path, and its start becomes interactive.
    const chat = await service.openChatStream(b, first, 'Hello from B')
    assert.equal(chat.status, 200)
    await chat.text()
    const queued = await statusOf(b, first)
    assert.equal(queued.container, 'queued')
    assert.equal(queued.queuePosition, 1, "B's first agent is next for the slot")
    assert.equal(await positionOf(a.token, burst[0]), 2)
    const holding = await statusOf(a.token, holder)
    assert.equal(holding.container, 'starting', 'the holder still has the slot')
    assert.isNull(holding.queuePosition, 'an agent out of the queue has no place in it')

    // The holder's boot ends: B's agent boots while all of A's burst still waits.
    await waitFor(
      async () => {
        const status = await statusOf(b, first)
        return status.phase === 'booting' || status.container === 'running' ? status : undefined
      },
      { timeoutMs: HOLD_SLOT_MS + 30_000, intervalMs: 100, what: "B's agent to take the slot" }
    )
    const burstNow = await Promise.all(burst.map((agentId) => statusOf(a.token, agentId)))
    assert.deepEqual(
      burstNow.map((status) => status.container),
      ['queued', 'queued', 'queued'],
      "A's background boots wait for B's agent"
    )
    assert.deepEqual(
      burstNow.map((status) => status.queuePosition),
      [1, 2, 3]
    )

    // The queue drains: every agent runs in the end.
    await service.waitUntilRunning(b, first, 30_000)
    for (const agentId of burst) await service.waitUntilRunning(a.token, agentId, 60_000)
    for (const agentId of [holder, ...burst]) {
      await service.call(`/agents/${agentId}`, { method: 'DELETE', token: a.token })
    }
    await service.call(`/agents/${first}`, { method: 'DELETE', token: b })
  }).timeout(240_000)
})
