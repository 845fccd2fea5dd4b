import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { WebSocketServer } from 'ws'
import type { AddressInfo } from 'node:net'
import { channelsConfig } from '#config/channels'
import { claimFreeRows, rowStore, writeReport } from '#channels/services/channel_rows'
import {
  channelStatusOf,
  channelSupervisor,
  channelTestGroup,
  endChannelTest,
  settle,
} from '#tests/helpers/channels'
import { waitFor } from '#tests/helpers/runtime'
import { startPairing } from '#channels/services/channel_rows'
import { channelPlugin } from '#channels/services/channel_config'
import { putToSleep, servingFixtureAgent } from '#tests/helpers/agents_http'
import { DEFAULT_CONNECTION_CONFIG, makeEventBuffer, proto, type WAMessage } from 'baileys'
import { connectionStep } from '../../../plugins/whatsapp/connection_events.ts'
import { routeMessages, type MessageSocket } from '../../../plugins/whatsapp/messages.ts'

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
 *
 * Messages: the seam is the Baileys socket's event emitter (Baileys' own
 * event buffer) and its send calls. Inbound messages are Baileys'
 * protobuf WebMessageInfo as its socket emits them after decryption; the
 * connector's handler, the ingress router and the chat service are real,
 * and what the connector asks the socket to send is recorded.
 */
interface SentOnWhatsApp {
  jid: string
  text: string
  quotedId?: string
}

/** A Baileys socket's message surface: its real event buffer, sends recorded. */
function recordingSocket() {
  const sent: SentOnWhatsApp[] = []
  const presence: string[] = []
  const socket = {
    ev: makeEventBuffer(DEFAULT_CONNECTION_CONFIG.logger.child({ test: 'whatsapp' })),
    async sendMessage(jid: string, content: { text: string }, options?: { quoted?: WAMessage }) {
      sent.push({ jid, text: content.text, quotedId: options?.quoted?.key.id ?? undefined })
      return undefined
    },
    async sendPresenceUpdate(type: string) {
      presence.push(type)
    },
  } as unknown as MessageSocket
  return { socket, sent, presence }
}

let messageSeq = 0
function inboundMessage(
  jid: string,
  text: string,
  options: { fromMe?: boolean; pushName?: string } = {}
) {
  messageSeq++
  return proto.WebMessageInfo.fromObject({
    key: { remoteJid: jid, fromMe: options.fromMe ?? false, id: `3EB0${messageSeq}A1B2C3` },
    messageTimestamp: Math.floor(Date.now() / 1000),
    pushName: options.pushName ?? 'Ada',
    message: { conversation: text },
  }) as WAMessage
}
test.group('Channels: whatsapp', (group) => {
  const { owners, ownerAndAgent } = channelTestGroup(group)
  const previousWait = channelsConfig.pairingWaitSeconds
  group.teardown(async () => {
    channelsConfig.pairingWaitSeconds = previousWait
  })

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
    const { agent, jwt } = await ownerAndAgent({ status: 'stopped' })
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

  /** A WhatsApp connection of `agentId` whose connector handler listens on a recording socket. */
  async function listeningConnector(agentId: string) {
    const row = await startPairing(agentId, 'whatsapp')
    const plugin = channelPlugin('whatsapp')
    const holder = channelSupervisor('instance-a')
    const context = await holder.contextFor(row, plugin, new AbortController().signal, () => {})
    const recording = recordingSocket()
    routeMessages(recording.socket, context)
    return recording
  }

  test('a direct message is answered through the ingress router, quoting it; groups, own messages and history are not', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await ownerAndAgent()
    const { socket, sent, presence } = await listeningConnector(agent.id)
    const ada = '4915112345678@s.whatsapp.net'

    const question = inboundMessage(ada, 'What is the capital of France?')
    socket.ev.emit('messages.upsert', { messages: [question], type: 'notify' })
    const [reply] = await waitFor('the reply', () => sent.length > 0 && sent)
    assert.equal(reply.jid, ada, 'answered in the same chat')
    assert.include(reply.text, 'What is the capital of France?', 'the agent answered this message')
    assert.equal(reply.quotedId, question.key.id, 'quoting it')
    assert.include(presence, 'composing', 'typing shown while the agent works')

    // Delivered again, a group, the linked phone's own message, history sync: none answered.
    socket.ev.emit('messages.upsert', { messages: [question], type: 'notify' })
    socket.ev.emit('messages.upsert', {
      messages: [inboundMessage('120363025246125888@g.us', 'hello group')],
      type: 'notify',
    })
    socket.ev.emit('messages.upsert', {
      messages: [inboundMessage(ada, 'note to self', { fromMe: true })],
      type: 'notify',
    })
    socket.ev.emit('messages.upsert', {
      messages: [inboundMessage(ada, 'an old message')],
      type: 'append',
    })
    socket.ev.emit('messages.upsert', {
      messages: [inboundMessage(ada, 'And of Italy?')],
      type: 'notify',
    })
    await waitFor('the second reply', () => sent.length >= 2)
    await settle()
    assert.lengthOf(sent, 2)
    assert.include(sent[1].text, 'And of Italy?')

    const history = await db
      .from('channel_messages')
      .where({ agent_id: agent.id, channel: 'whatsapp' })
      .orderBy('received_at')
    assert.deepEqual(
      history.map((row) => row.outcome),
      ['answered', 'answered'],
      'each answered message recorded once'
    )
    const feed = await client.get(`/agents/${agent.id}/feed`).bearerToken(jwt)
    const contents = feed.body().data.events.map((event: any) => event.content)
    assert.isTrue(contents.some((content: string) => /Message via channel/.test(content)))
  })

  test('a sleeping agent is reached on WhatsApp: answered at once, and woken; the allowlist holds', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await servingFixtureAgent(client, await owners.create())
    await client
      .patch(`/agents/${agent.id}`)
      .bearerToken(jwt)
      .json({ config: { channels: { whatsapp: { allowFrom: ['4915112345678'] } } } })
      .then((answer) => answer.assertStatus(200))
    const service = await putToSleep(agent.id)
    assert.isFalse(await service.isRunning(agent.id))

    const { socket, sent } = await listeningConnector(agent.id)
    socket.ev.emit('messages.upsert', {
      messages: [inboundMessage('15550001111@s.whatsapp.net', 'let me in')],
      type: 'notify',
    })
    socket.ev.emit('messages.upsert', {
      messages: [inboundMessage('4915112345678@s.whatsapp.net', 'wake up please')],
      type: 'notify',
    })
    const [reply] = await waitFor('the reply', () => sent.length > 0 && sent)
    assert.include(reply.text, 'wake up please')
    await waitFor('the agent to wake', () => service.isRunning(agent.id), 20_000)
    await settle()
    assert.deepEqual(
      sent.map((message) => message.jid),
      ['4915112345678@s.whatsapp.net'],
      'a sender off the allowlist is not answered'
    )
  })
})
