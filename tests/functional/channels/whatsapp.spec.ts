import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { WebSocketServer } from 'ws'
import type { AddressInfo } from 'node:net'
import { channelsConfig } from '#config/channels'
import { claimFreeRows, rowStore, writeReport } from '#channels/services/channel_rows'
import { agentOwners } from '#tests/helpers/agents_http'
import {
  agentForChannels,
  channelStatusOf,
  channelSupervisor,
  endChannelTest,
} from '#tests/helpers/channels'
import { waitFor } from '#tests/helpers/runtime'
import { connectionStep } from '../../../plugins/whatsapp/connection_events.ts'

/**
 * WhatsApp pairing. WhatsApp Web's servers (a Noise XX handshake with
 * WhatsApp's certificate, then its binary node protocol) have no offline
 * stand-in here, so the seam is the connection holder's report: the real
 * Baileys connector is shown to open WhatsApp Web's WebSocket (a local
 * server at WHATSAPP_WEB_URL receives its Noise hello), and the pairing
 * life cycle (QR, refresh, linked, logged out) is played by a holder that
 * reports what Baileys' connection.update events become
 * (plugins/whatsapp/connection_events.ts, unit-tested with Baileys' own
 * disconnect codes). Everything between the route and that report is real.
 */
test.group('Channels: whatsapp', (group) => {
  const owners = agentOwners({ credits: 10_000 })
  const previousWait = channelsConfig.pairingWaitSeconds
  // Rows left by other tests would be claimed too: every test starts with none.
  group.each.setup(() => endChannelTest())
  group.each.teardown(() => endChannelTest())
  group.teardown(async () => {
    channelsConfig.pairingWaitSeconds = previousWait
    await owners.removeAgents()
  })

  async function ownerAndAgent(status: 'active' | 'stopped' = 'active') {
    return agentForChannels(await owners.create(), { status })
  }

  async function qrReport(raw: string) {
    const step = await connectionStep({ qr: raw }, undefined)
    if (step.kind !== 'report') throw new Error('no QR report')
    return step.report
  }

  test('pair-channel answers the holder’s QR as a PNG data URL; refresh, link and logout show in channel-status', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await ownerAndAgent()
    const initial = await channelStatusOf(client, jwt, agent.id)
    assert.deepEqual(initial.whatsapp, { connected: false, state: 'disconnected', lastError: null })

    // Japa sends a request when it is awaited: Promise.resolve sends it now.
    const pairing = Promise.resolve(
      client.post(`/agents/${agent.id}/pair-channel`).bearerToken(jwt).json({ channel: 'whatsapp' })
    )
    // Another instance holds the new connection and reports its first QR.
    const [row] = await waitFor('the pairing row', async () => {
      const claimed = await claimFreeRows('instance-b', 10)
      return claimed.length > 0 && claimed
    })
    assert.equal(row.channel, 'whatsapp')
    const first = await qrReport('2@first-ref,noise,identity,adv')
    assert.isTrue(await writeReport(row.id, 'instance-b', first))
    const answer = await pairing
    answer.assertStatus(200)
    assert.equal(answer.body().data.qrCode, first.qr!.dataUrl)
    assert.match(answer.body().data.qrCode, /^data:image\/png;base64,/)
    assert.isAtLeast(answer.body().data.expiresIn, 55)
    assert.isAtMost(answer.body().data.expiresIn, 60)
    const pending = await channelStatusOf(client, jwt, agent.id)
    assert.deepEqual(pending.whatsapp, { connected: false, state: 'qr_pending', lastError: null })

    // A refreshed QR replaces the old one; a link makes it connected with the phone.
    const refreshed = await qrReport('2@second-ref,noise,identity,adv')
    await writeReport(row.id, 'instance-b', refreshed)
    const [stored] = await db.from('agent_channels').where('id', row.id)
    assert.equal(stored.qr_code, refreshed.qr!.dataUrl)
    const linked = await connectionStep(
      { connection: 'open' },
      { id: '4915112345678:3@s.whatsapp.net' }
    )
    if (linked.kind !== 'report') throw new Error('not linked')
    await writeReport(row.id, 'instance-b', linked.report)
    const connected = await channelStatusOf(client, jwt, agent.id)
    assert.deepEqual(connected.whatsapp, {
      connected: true,
      phone: '+4915112345678',
      state: 'connected',
      lastError: null,
    })
    const detail = await client.get(`/agents/${agent.id}`).bearerToken(jwt)
    assert.deepEqual(detail.body().data.integrations, ['whatsapp'])

    // The session's keys are stored encrypted, never as plain JSON.
    await rowStore(row.id).save(JSON.stringify({ creds: { noiseKey: 'secret-key-material' } }))
    const [withSession] = await db.from('agent_channels').where('id', row.id)
    assert.notInclude(withSession.session_state, 'secret-key-material')
    assert.deepEqual(JSON.parse((await rowStore(row.id).load<string>())!), {
      creds: { noiseKey: 'secret-key-material' },
    })

    const disconnected = await client
      .post(`/agents/${agent.id}/disconnect-channel`)
      .bearerToken(jwt)
      .json({ channel: 'whatsapp' })
    assert.deepEqual(disconnected.body().data, { disconnected: 'whatsapp' })
    const after = await channelStatusOf(client, jwt, agent.id)
    assert.equal(after.whatsapp.state, 'disconnected')
    assert.lengthOf(await db.from('agent_channels').where('id', row.id), 0, 'the session is gone')
  })

  test('the Baileys connector opens WhatsApp Web’s WebSocket with its Noise hello; unreachable, pairing answers 503 in words', async ({
    client,
    assert,
  }) => {
    const hellos: Buffer[] = []
    const server = new WebSocketServer({ port: 0, host: '127.0.0.1' })
    server.on('connection', (socket) => {
      socket.once('message', (data) => {
        hellos.push(Buffer.from(data as Buffer))
        socket.close()
      })
    })
    await new Promise((resolve) => server.once('listening', resolve))
    const previousUrl = process.env.WHATSAPP_WEB_URL
    process.env.WHATSAPP_WEB_URL = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/ws/chat`
    channelsConfig.pairingWaitSeconds = 4
    try {
      const { agent, jwt } = await ownerAndAgent()
      const pairing = Promise.resolve(
        client
          .post(`/agents/${agent.id}/pair-channel`)
          .bearerToken(jwt)
          .json({ channel: 'whatsapp' })
      )
      const holder = channelSupervisor('instance-a')
      await waitFor('the pairing row', async () => {
        await holder.tick()
        return holder.heldIds().length > 0
      })
      await waitFor('the Noise hello', () => hellos.length > 0)
      assert.equal(hellos[0].subarray(0, 2).toString(), 'WA', 'WhatsApp Web’s intro header')
      const answer = await pairing
      answer.assertStatus(503)
      assert.match(answer.body().error, /whatsapp pairing/i)
    } finally {
      if (previousUrl === undefined) delete process.env.WHATSAPP_WEB_URL
      else process.env.WHATSAPP_WEB_URL = previousUrl
      channelsConfig.pairingWaitSeconds = previousWait
      await endChannelTest()
      await new Promise((resolve) => server.close(resolve))
    }
  })

  test('pairing a stopped agent is a 409; an unknown channel a 400', async ({ client }) => {
    const { agent, jwt } = await ownerAndAgent('stopped')
    const stopped = await client
      .post(`/agents/${agent.id}/pair-channel`)
      .bearerToken(jwt)
      .json({ channel: 'whatsapp' })
    stopped.assertStatus(409)
    stopped.assertBodyContains({ code: 'AGENT_NOT_RUNNING' })
    const unknown = await client
      .post(`/agents/${agent.id}/pair-channel`)
      .bearerToken(jwt)
      .json({ channel: 'signal' })
    unknown.assertStatus(400)
  })
})
