import { join } from 'node:path'
import { existsSync } from 'node:fs'
import { test } from '@japa/runner'
import { agentProcesses } from '#tests/helpers/agent_processes'
import {
  buildOnce,
  copyFixturePluginIntoBuild,
  npmStart,
  serviceProcesses,
  type NpmStarted,
} from '#tests/helpers/built_server'
import { ConsoleVisitor } from '#tests/helpers/console'
import { waitFor } from '#tests/helpers/processes'
import { signUpAccountAt } from '#tests/helpers/service_under_fault'

async function call(service: NpmStarted, path: string, token: string, json?: unknown) {
  const response = await fetch(`${service.url}${path}`, {
    method: json === undefined ? 'GET' : 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      ...(json === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: json === undefined ? undefined : JSON.stringify(json),
  })
  return { status: response.status, body: (await response.json()) as any }
}

/** A fixture agent of a new account (the free tier holds one agent each). */
async function fixtureAgent(service: NpmStarted, config: Record<string, unknown> = {}) {
  const { token } = await signUpAccountAt(service.url, service.storage)
  const created = await call(service, '/agents', token, {
    name: 'Npm start',
    framework: 'fixture',
    config,
  })
  if (created.status !== 201) throw new Error(`create agent: ${JSON.stringify(created)}`)
  return { id: created.body.data.id as string, token }
}

async function waitForContainer(
  service: NpmStarted,
  agent: { id: string; token: string },
  state: string
) {
  let last: unknown
  await waitFor(
    async () => {
      const status = await call(service, `/agents/${agent.id}/status`, agent.token)
      last = status.body.data
      return status.body.data?.container === state ? true : undefined
    },
    // A fixture boot takes a second or two; a loaded CI host has taken a minute.
    { timeoutMs: 120_000, what: `agent ${agent.id} to be ${state}` }
  ).catch((error: Error) => {
    throw new Error(
      `${error.message}; its last status: ${JSON.stringify(last)}; ` +
        `the service said:\n${service.output().slice(-3000)}`
    )
  })
}

/** The service's processes, after checking the built server and its PostgreSQL are among them. */
function serverAndPostgres(service: NpmStarted): string[] {
  const processes = service.processes()
  const listing = processes.join('\n')
  if (!processes.some((line) => line.includes('build/bin/server.js'))) {
    throw new Error(`no built server among:\n${listing}`)
  }
  if (!processes.some((line) => / -D \S+\/postgres/.test(line))) {
    throw new Error(`no embedded PostgreSQL among:\n${listing}`)
  }
  return processes
}

test.group('npm start stops cleanly', (group) => {
  let service: NpmStarted | undefined
  group.each.teardown(async () => {
    await service?.destroy()
    service = undefined
  })

  test('SIGTERM to npm stops the server, its agents (running, booting, sleeping) and the embedded PostgreSQL', async ({
    assert,
  }) => {
    // Agents of the test-only fixture framework (compiled into build/ with the tests): real
    // framework boots take a GB each. The rest is `npm start` as the README runs it.
    await buildOnce()
    copyFixturePluginIntoBuild()
    service = await npmStart({ NODE_ENV: 'test', EXTRA_PLUGIN_DIRS: 'tests/fixtures/plugins' })
    const agentsDir = join(service.storage, 'agents')

    const running = await fixtureAgent(service)
    const sleeping = await fixtureAgent(service)
    await waitForContainer(service, running, 'running')
    await waitForContainer(service, sleeping, 'running')
    const operator = await signUpAccountAt(service.url, service.storage)
    const role = await service.ace('user:role', operator.email, 'operator')
    assert.equal(role.code, 0, role.output)
    const visitor = new ConsoleVisitor(service.url)
    await visitor.signIn(operator)
    await visitor.get(`/console/agents/${sleeping.id}`)
    const slept = await visitor.post(`/console/agents/${sleeping.id}/sleep`)
    assert.match(String(slept.status), /^30\d$/, slept.html)
    await waitForContainer(service, sleeping, 'sleeping')
    const booting = await fixtureAgent(service, { readyDelayMs: 600_000 })
    await waitForContainer(service, booting, 'starting')
    await waitFor(async () => (agentProcesses(agentsDir).has(booting.id) ? true : undefined), {
      what: 'the booting agent process',
    })

    // What the count below looks at is really there: the server, PostgreSQL, both agents.
    // Agents first, then the service's list: a pid that ends in between (a short-lived helper
    // of the agent's) is not held against the list.
    const agentPids = [running, booting].map(
      (agent) => agentProcesses(agentsDir).get(agent.id) ?? []
    )
    const before = serverAndPostgres(service)
    for (const pids of agentPids) {
      assert.isNotEmpty(pids)
      for (const pid of pids.filter((alive) => existsSync(`/proc/${alive}`))) {
        assert.isTrue(
          before.some((line) => line.startsWith(`${pid} `)),
          `agent process ${pid}`
        )
      }
    }

    await service.stop('SIGTERM')
    const left = await waitFor(
      async () => (serviceProcesses(service!.storage).length === 0 ? [] : undefined),
      { timeoutMs: 30_000, what: 'the service to stop' }
    ).catch(() => serviceProcesses(service!.storage))
    assert.deepEqual(left, [], 'nothing of the service outlives npm')
    assert.deepEqual([...agentProcesses(agentsDir).keys()], [])
  }).timeout(300_000)

  test('SIGINT to npm stops the server and the embedded PostgreSQL', async ({ assert }) => {
    service = await npmStart()
    serverAndPostgres(service)

    await service.stop('SIGINT')
    const left = await waitFor(
      async () => (serviceProcesses(service!.storage).length === 0 ? [] : undefined),
      { timeoutMs: 30_000, what: 'the service to stop' }
    ).catch(() => serviceProcesses(service!.storage))
    assert.deepEqual(left, [], 'nothing of the service outlives npm')
  }).timeout(300_000)
})
