/**
 * Helpers for the agents area's HTTP tests: agents of the test-only
 * `fixture` framework (loaded by the app in tests through EXTRA_PLUGIN_DIRS,
 * see bin/test.ts), waiting for their containers, and cleaning up so no
 * agent process outlives its test.
 */
import app from '@adonisjs/core/services/app'
import { agentsDir } from '#core/bootstrap/paths'
import { agentPaths, type AgentPaths } from '#runtime/agent_paths'
import { gatewayTokenFor } from '#runtime/credentials'
import type { ApiClient } from '@japa/api-client'
import Agent from '#agents/models/agent'
import type User from '#identity/models/user'
import { createUser, type CreateUserOptions } from '#tests/helpers/identity'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import { decryptSecrets } from '#agents/services/config_secrets'
import type { RuntimeService } from '#runtime/runtime_service'
import { jwtFor } from '#tests/helpers/identity'
import { waitFor } from '#tests/helpers/runtime'

export function runtime(): Promise<RuntimeService> {
  return app.container.make('runtime')
}

/** POST /agents with the fixture framework; returns the answer's data (201 asserted). */
export async function createFixtureAgent(
  client: ApiClient,
  user: { id: string },
  body: Record<string, unknown> = {}
) {
  const response = await client
    .post('/agents')
    .bearerToken(jwtFor(user))
    .json({ name: 'Fixture Agent', framework: 'fixture', ...body })
  response.assertStatus(201)
  return response.body().data as { id: string; slug: string; [field: string]: unknown }
}

/** Waits until the agent's container answers its readiness path and what its start changed is stored. */
export async function waitUntilServing(agentId: string, timeoutMs = 20_000) {
  const service = await runtime()
  await waitFor('the agent container to run', () => service.isRunning(agentId), timeoutMs)
  await service.waitUntilReady(agentId, { timeoutMs })
  // What its start changed in the database (the asleep mark, feed events) is written in the background.
  await agentLifecycle.eventsStored()
}

/** A fixture agent of `owner` made through the API, serving; with the owner's JWT. */
export async function servingFixtureAgent(client: ApiClient, owner: { id: string }) {
  const agent = await createFixtureAgent(client, owner)
  await waitUntilServing(agent.id)
  return { agent, jwt: jwtFor(owner) }
}

/** Puts an agent to sleep and waits until its container is down; answers the runtime. */
export async function putToSleep(agentId: string): Promise<RuntimeService> {
  await agentLifecycle.sleep(agentId)
  await agentLifecycle.settled()
  return runtime()
}

/** Stops and deletes every agent of these users (containers and folders included). */
export async function removeAgentsOf(...users: { id: string }[]) {
  await agentLifecycle.settled()
  for (const user of users) {
    const agents = await Agent.query().where('user_id', user.id)
    for (const agent of agents) {
      await agentLifecycle.remove(agent.id)
      await agent.delete()
    }
  }
}

/**
 * The accounts a test file creates, so its teardown can remove their agents
 * (and containers) in one call.
 *
 *   const owners = agentOwners({ tier: 'pro' })
 *   const user = await owners.create({ credits: 100 })
 *   group.teardown(() => owners.removeAgents())
 */
export function agentOwners(defaults: CreateUserOptions = {}) {
  const users: User[] = []
  return {
    async create(options: CreateUserOptions = {}): Promise<User> {
      const user = await createUser({ ...defaults, ...options })
      users.push(user)
      return user
    },
    removeAgents: () => removeAgentsOf(...users),
  }
}

/** How many agents the user has now (any status). */
export async function agentCountOf(user: { id: string }): Promise<number> {
  const agents = await Agent.query().where('user_id', user.id)
  return agents.length
}

/** The HTTP status of a request (for one-line assertions). */
export async function statusOf(request: PromiseLike<{ status(): number }>): Promise<number> {
  const response = await request
  return response.status()
}

/** The agent's config as stored, decrypted. */
export async function storedConfigOf(agentId: string): Promise<Record<string, unknown>> {
  const agent = await Agent.findOrFail(agentId)
  return decryptSecrets(agent.config)
}

/** A file of the agent's workspace through the API (undefined when it is not there). */
export async function readWorkspaceFile(
  client: ApiClient,
  jwt: string,
  agentId: string,
  path: string
): Promise<string | undefined> {
  const answer = await client
    .get(`/agents/${agentId}/container-files/read`)
    .qs({ path })
    .bearerToken(jwt)
  return answer.status() === 200 ? (answer.body().data.content as string) : undefined
}

/** Writes a file of the agent's workspace through the API (200 asserted). */
export async function writeWorkspaceFile(
  client: ApiClient,
  jwt: string,
  agentId: string,
  path: string,
  content: string
) {
  const answer = await client
    .put(`/agents/${agentId}/container-files`)
    .bearerToken(jwt)
    .json({ path, content })
  answer.assertStatus(200)
}

/** The agent's local folders (process driver, the app's storage). */
export function foldersOf(agentId: string): AgentPaths {
  return agentPaths(agentsDir(app.appRoot), agentId)
}

/**
 * Calls the fixture framework's own HTTP API inside the agent's container
 * (`/log`, `/burn`, `/crash`), the way the service reaches it.
 */
export async function callFixture(agentId: string, path: string): Promise<unknown> {
  const service = await runtime()
  const info = await service.status(agentId)
  if (!info.baseUrl) throw new Error(`agent ${agentId} is not running`)
  const token = await gatewayTokenFor(foldersOf(agentId).credentialsFile)
  const response = await fetch(`${info.baseUrl}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
  })
  return response.json()
}

/** One chat turn through the agent's own framework (fixture commands: __crash__, __write__, __remember__). */
export async function chatWithContainer(agentId: string, message: string) {
  const service = await runtime()
  return service.chat(agentId, {
    messages: [{ role: 'user', content: message }],
    conversationId: `test-${agentId}`,
  })
}
