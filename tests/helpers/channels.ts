import db from '@adonisjs/lucid/services/db'
import type { ApiClient } from '@japa/api-client'
import type { AgentStatus } from '#agents/models/agent'
import { ChannelSupervisor, type SupervisorOptions } from '#channels/services/channel_supervisor'
import type { Group } from '@japa/runner/core'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { agentOwners } from '#tests/helpers/agents_http'
import { jwtFor } from '#tests/helpers/identity'
import { waitFor } from '#tests/helpers/runtime'

/**
 * Supervisors of channel tests: real ones, driven tick by tick. A
 * supervisor claims every free row in the database, so each test ends by
 * stopping its supervisors and forgetting every channel row
 * (`endChannelTest` in group.each.teardown): the next test starts from none.
 *
 *   const supervisor = channelSupervisor('instance-a', { apiBaseUrls: { telegram: fake.url } })
 *   await supervisor.tick()
 */
const running: ChannelSupervisor[] = []

export function channelSupervisor(holder: string, options: SupervisorOptions = {}) {
  const supervisor = new ChannelSupervisor({ holder, ...options })
  running.push(supervisor)
  return supervisor
}

export async function endChannelTest() {
  await Promise.all(running.splice(0).map((supervisor) => supervisor.stop()))
  await db.from('agent_channels').delete()
}

/** GET /agents/:id/channel-status, asserted 200. */
export async function channelStatusOf(client: ApiClient, jwt: string, agentId: string) {
  const answer = await client.get(`/agents/${agentId}/channel-status`).bearerToken(jwt)
  answer.assertStatus(200)
  return answer.body().data
}

/** PATCH /agents/:id with `config.channels.<channel>`, asserted 200. */
export async function configureChannel(
  client: ApiClient,
  jwt: string,
  agentId: string,
  channel: string,
  settings: Record<string, unknown> | null
) {
  const answer = await client
    .patch(`/agents/${agentId}`)
    .bearerToken(jwt)
    .json({ config: { channels: { [channel]: settings } } })
  answer.assertStatus(200)
  return answer
}

/** Lets anything that would wrongly happen have its chance (only before asserting an absence). */
export function settle(ms = 300) {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/**
 * An agent of the fixture framework made in the database (no container:
 * chat answers on the hosted path), asleep when asked; with its owner's JWT.
 */
export async function agentForChannels(
  owner: { id: string },
  options: { sleeping?: boolean; status?: AgentStatus } = {}
) {
  const agent = await createAgentFor(owner, { framework: 'fixture', status: options.status })
  if (options.sleeping) {
    await db.from('agents').where('id', agent.id).update({ sleeping_since: new Date() })
  }
  return { agent, jwt: jwtFor(owner) }
}

/** Waits until channel-status shows `state` for `channel`; answers that entry. */
export function waitForChannelState(
  client: ApiClient,
  jwt: string,
  agentId: string,
  channel: string,
  state: string
) {
  return waitFor(`${channel} to be ${state}`, async () => {
    const status = await channelStatusOf(client, jwt, agentId)
    return status[channel].state === state && status[channel]
  })
}

/**
 * What every channel test group shares: each test starts and ends with no
 * channel rows and no running supervisor; owners (with credits) and their
 * agents are removed after the group.
 */
export function channelTestGroup(group: Group) {
  const owners = agentOwners({ credits: 10_000 })
  group.each.setup(() => endChannelTest())
  group.each.teardown(() => endChannelTest())
  group.teardown(() => owners.removeAgents())
  return {
    owners,
    /** A fixture agent (asleep or in a given status when asked) of a new owner, with its JWT. */
    async ownerAndAgent(options: { sleeping?: boolean; status?: AgentStatus } = {}) {
      return agentForChannels(await owners.create(), options)
    },
  }
}
