import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { waitFor } from '#tests/helpers/processes'
import { agentProcesses, agentProcessIds } from '#tests/helpers/agent_processes'
import { startModelUpstream, type ModelUpstream } from '#tests/helpers/model_upstream'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'

test.group('Stopping the service (process driver)', (group) => {
  let service: ServiceUnderFault
  let upstream: ModelUpstream
  group.setup(async () => {
    upstream = await startModelUpstream()
    service = await startServiceUnderFault({
      MODEL_API_URL: upstream.baseUrl,
      MODEL_API_KEY: 'sk-shutdown-test',
      MODEL_NAME: 'shutdown-model',
    })
    return async () => {
      // Stopped right after its restart, while it recovers its agent: nothing may be left running.
      await service.destroy()
      await upstream.close()
    }
  })

  test('SIGTERM stops the agent processes it started; none is left behind', async ({ assert }) => {
    const token = await service.signUp()
    const agentId = await service.createFixtureAgent(token, 'Shutdown agent')
    await waitFor(async () => (agentProcessIds(agentId).length > 0 ? true : undefined), {
      timeoutMs: 30_000,
      what: 'the agent process to run',
    })

    const exited = new Promise((resolve) => service.server.child.once('exit', resolve))
    const stopping = Date.now()
    service.server.child.kill('SIGTERM')
    await exited
    console.log(`    SIGTERM with one agent: exited after ${Date.now() - stopping} ms`)
    assert.deepEqual(agentProcessIds(agentId), [], 'no agent process outlives the service')
    await service.restart()
  }).timeout(120_000)

  test('SIGTERM with an open chat stream and WebSocket: sockets told 1001, the service exits', async ({
    assert,
  }) => {
    const token = await service.signUp()
    const agentId = await service.createFixtureAgent(token, 'Busy agent')
    await service.call(`/agents/${agentId}/stop`, { method: 'POST', token })
    upstream.set({ reply: 'a b c d e f g h i j', tokenDelayMs: 5_000 })

    const sse = await service.openChatStream(token, agentId, 'Take your time')
    assert.equal(sse.status, 200)
    const { closed: wsClosed } = await service.openChatSocket(token, agentId)

    const started = Date.now()
    const exited = new Promise((resolve) => service.server.child.once('exit', resolve))
    service.server.child.kill('SIGTERM')
    const outcome = await Promise.race([
      exited.then(() => 'exited'),
      new Promise((resolve) => setTimeout(() => resolve('still running'), 30_000)),
    ])
    console.log(`    SIGTERM with open streams: exited after ${Date.now() - started} ms`)
    assert.equal(outcome, 'exited', 'open connections do not keep a stopping service alive')
    assert.equal(await wsClosed, 1001)
    await sse.body?.cancel().catch(() => {})
    await service.restart()
  }).timeout(120_000)
})

/** True while a `criu <action>` runs on this agent's checkpoint (its folder is in the arguments). */
function criuRunning(agentId: string, action: 'dump' | 'restore'): boolean {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0')
      if (/criu$/.test(args[0]) && args[1] === action && args.some((arg) => arg.includes(agentId)))
        return true
    } catch {
      // Gone meanwhile.
    }
  }
  return false
}

/**
 * SIGTERM to the real server while its agents are in each state a shutdown
 * must not leave behind: booting, waiting in the boot queue, being
 * checkpointed to sleep, waking from a checkpoint. One boot slot
 * (AGENT_BOOT_CONCURRENCY=1) makes a queue; a 2 s idle time makes sleeps
 * (in a group of its own: it would also put the queued agent to sleep).
 */
function stoppingMidOperation(
  title: string,
  env: Record<string, string>,
  define: (context: MidOperation) => void
) {
  test.group(`Stopping the service mid-operation (process driver): ${title}`, (group) => {
    let service: ServiceUnderFault | undefined
    let upstream: ModelUpstream
    group.setup(async () => {
      upstream = await startModelUpstream()
      service = await startServiceUnderFault({
        MODEL_API_URL: upstream.baseUrl,
        MODEL_API_KEY: 'sk-shutdown-test',
        MODEL_NAME: 'shutdown-model',
        ...env,
      })
      return async () => {
        await service?.destroy()
        await upstream.close()
      }
    })
    define(midOperation(() => service!))
  })
}

type MidOperation = ReturnType<typeof midOperation>

/** What the mid-operation tests do to the service of their group (`current`). */
function midOperation(current: () => ServiceUnderFault) {
  /** Every process of this service's agents (their homes are under its storage). */
  const left = () => [...agentProcesses(join(current().storage, 'agents')).values()].flat()

  async function sigterm(state: string, assert: { equal: Function; deepEqual: Function }) {
    const exited = new Promise((resolve) => current().server.child.once('exit', resolve))
    const started = Date.now()
    current().server.child.kill('SIGTERM')
    const outcome = await Promise.race([
      exited.then(() => 'exited'),
      new Promise((resolve) => setTimeout(() => resolve('still running'), 30_000)),
    ])
    console.log(`    SIGTERM ${state}: exited after ${Date.now() - started} ms`)
    assert.equal(outcome, 'exited', `the service exits (${state})`)
    assert.deepEqual(left(), [], `no agent process outlives the service (${state})`)
    await current().restart()
  }

  async function createAgent(token: string, name: string, config: Record<string, unknown> = {}) {
    const created = await current().call('/agents', {
      method: 'POST',
      token,
      json: { name, framework: 'fixture', config },
    })
    if (created.status !== 201) throw new Error(`create agent: ${JSON.stringify(created)}`)
    return created.body.data.id as string
  }

  const containerOf = async (token: string, agentId: string) => {
    const answer = await current().call(`/agents/${agentId}/status`, { token })
    return answer.body.data?.container
  }

  /** For a failure's message: the server's last output, the agent's status and its own log. */
  async function whatItDid(token: string, agentId: string) {
    const status = await current().call(`/agents/${agentId}/status`, { token }).catch(String)
    let log: string
    try {
      log = readFileSync(
        join(current().storage, 'agents', '.runtime', agentId, 'output.log'),
        'utf8'
      )
    } catch (error) {
      log = String(error)
    }
    return [
      `server: ${current().server.output().slice(-3000)}`,
      `status: ${JSON.stringify(status)}`,
      `agent log: ${log.slice(-3000)}`,
    ].join('\n')
  }

  /** An account that may hold several agents (founding_member: 10, no expiry). */
  async function roomyAccount() {
    const { token, email } = await current().signUpAccount()
    await current().query(`update users set tier = 'founding_member' where email = $1`, [email])
    return token
  }

  return { current, sigterm, createAgent, containerOf, whatItDid, roomyAccount }
}

stoppingMidOperation('a boot and the queue', { AGENT_BOOT_CONCURRENCY: '1' }, (mid) => {
  test('SIGTERM while one agent boots and another waits in the queue', async ({ assert }) => {
    const token = await mid.roomyAccount()
    const booting = await mid.createAgent(token, 'Booting', { readyDelayMs: 120_000 })
    const agents = [booting]
    try {
      await waitFor(async () => (agentProcessIds(booting).length > 0 ? true : undefined), {
        timeoutMs: 30_000,
        what: 'the booting agent to run',
      })
      // Made once the first holds the only boot slot: created together, either may reach the
      // queue first (on a loaded host the second often did, booted at once and never queued).
      const queued = await mid.createAgent(token, 'Queued')
      agents.push(queued)
      await waitFor(
        async () => ((await mid.containerOf(token, queued)) === 'queued' ? true : undefined),
        { timeoutMs: 60_000, what: 'the second agent to queue' }
      ).catch(async (error: Error) => {
        const second = await mid.current().call(`/agents/${queued}/status`, { token }).catch(String)
        throw new Error(
          `${error.message}\nsecond: ${JSON.stringify(second)}\nfirst: ${await mid.whatItDid(token, booting)}`
        )
      })
      await mid.sigterm('while booting and queued', assert)
    } finally {
      // Recovered at the restart (or still up after a failure): out of the way of the next tests.
      for (const agentId of agents) {
        await mid.current().call(`/agents/${agentId}`, { method: 'DELETE', token })
      }
    }
  }).timeout(180_000)
})

stoppingMidOperation('a checkpoint and a wake', { AGENT_IDLE_SLEEP_SECS: '2' }, (mid) => {
  test('SIGTERM while an idle agent is checkpointed, then while it wakes', async ({ assert }) => {
    const token = await mid.current().signUp()
    // Its checkpoint takes seconds: a window the SIGTERM cannot miss.
    const agentId = await mid.createAgent(token, 'Sleeper', { ballastMb: 160 })
    await waitFor(async () => (criuRunning(agentId, 'dump') ? true : undefined), {
      timeoutMs: 60_000,
      intervalMs: 10,
      what: 'its checkpoint to be taken (idle 2 s)',
    }).catch(async (error: Error) => {
      throw new Error(`${error.message}\n${await mid.whatItDid(token, agentId)}`)
    })
    await mid.sigterm('while checkpointing', assert)

    // Recovered at the restart, idle again: asleep, then a message wakes it.
    await waitFor(
      async () => ((await mid.containerOf(token, agentId)) === 'sleeping' ? true : undefined),
      { timeoutMs: 60_000, what: 'the agent to sleep again' }
    )
    // Answered on the hosted path while the agent wakes (the stream ends with the service).
    const stream = mid
      .current()
      .openChatStream(token, agentId, 'wake up')
      .catch(() => undefined)
    await waitFor(async () => (criuRunning(agentId, 'restore') ? true : undefined), {
      timeoutMs: 30_000,
      intervalMs: 10,
      what: 'its wake to restore the checkpoint',
    }).catch(async (error: Error) => {
      throw new Error(`${error.message}\n${await mid.whatItDid(token, agentId)}`)
    })
    await mid.sigterm('while waking', assert)
    const answer = await stream
    await answer?.body?.cancel().catch(() => {})
  }).timeout(240_000)
})
