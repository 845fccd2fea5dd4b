import db from '@adonisjs/lucid/services/db'
import type { ApiClient } from '@japa/api-client'
import { ChannelSupervisor, type SupervisorOptions } from '#channels/services/channel_supervisor'

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
