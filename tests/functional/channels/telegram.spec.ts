import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { channelsConfig } from '#config/channels'
import { SENDER_MESSAGES_PER_MINUTE } from '#channels/services/channel_router'
import { putToSleep, servingFixtureAgent } from '#tests/helpers/agents_http'
import {
  channelStatusOf as statusOf,
  channelSupervisor,
  channelTestGroup,
  configureChannel,
  settle,
} from '#tests/helpers/channels'
import { FakeTelegram } from '#tests/helpers/fake_telegram'
import { baseUrl } from '#tests/helpers/http'
import { jwtFor } from '#tests/helpers/identity'
import { waitFor } from '#tests/helpers/runtime'
import type { ApiClient } from '@japa/api-client'

/**
 * Telegram end to end: the real grammY client inside the telegram plugin
 * talks to a local Bot API stand-in (tests/helpers/fake_telegram.ts); the
 * supervisors here are real ones, driven tick by tick.
 */
let telegram: FakeTelegram

function supervisor(holder: string, options: { publicUrl?: string } = {}) {
  return channelSupervisor(holder, { apiBaseUrls: { telegram: telegram.url }, ...options })
}

function connectTelegram(client: ApiClient, jwt: string, agentId: string, settings: object) {
  return configureChannel(client, jwt, agentId, 'telegram', { ...settings })
}

test.group('Channels: telegram', (group) => {
  const { owners, ownerAndAgent } = channelTestGroup(group)
  group.setup(async () => {
    telegram = await new FakeTelegram().start()
  })
  group.teardown(async () => {
    await telegram.close()
  })

  test('a bot token in config connects by long polling; a message is answered in the same chat, once', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await ownerAndAgent()
    const token = telegram.addBot('helper_bot')
    const patched = await connectTelegram(client, jwt, agent.id, { botToken: token })
    assert.equal(patched.body().data.config.channels.telegram.botToken, '***', 'answered masked')
    const stored = await db.from('agents').where('id', agent.id).first()
    assert.notInclude(JSON.stringify(stored.config), token, 'stored encrypted')

    const instance = supervisor('instance-a')
    await instance.tick()
    await waitFor('getUpdates', () => telegram.bot(token).polling > 0)
    const status = await statusOf(client, jwt, agent.id)
    assert.deepEqual(status.telegram, {
      connected: true,
      username: 'helper_bot',
      state: 'connected',
      lastError: null,
    })
    for (const channel of Object.values(status) as any[]) {
      assert.properties(channel, ['connected', 'state', 'lastError'])
    }
    const detail = await client.get(`/agents/${agent.id}`).bearerToken(jwt)
    assert.deepEqual(detail.body().data.integrations, ['telegram'])

    const update = telegram.userSays(token, 'What is the capital of France?')
    const [reply] = await waitFor('the reply', () => {
      const sent = telegram.repliesTo(token, 4242)
      return sent.length > 0 && sent
    })
    assert.include(reply.text, 'What is the capital of France?', 'the agent answered this message')
    assert.equal(reply.replyTo, update.message.message_id, 'as a reply to it')
    assert.isTrue(telegram.chatActions.some((action) => action.action === 'typing'))

    // Telegram delivers the same message again (an unconfirmed offset): not answered twice.
    telegram.bot(token).queue.push(update)
    // Channel text skips the HTTP input gate: a NUL is removed, not stored (PostgreSQL refuses it).
    telegram.userSays(token, 'And of\u0000 Italy?')
    await waitFor('the second reply', () => telegram.repliesTo(token, 4242).length >= 2)
    await settle()
    const replies = telegram.repliesTo(token, 4242)
    assert.lengthOf(replies, 2)
    assert.include(replies[1].text, 'And of Italy?')
    const feed = await client.get(`/agents/${agent.id}/feed`).bearerToken(jwt)
    const contents = feed.body().data.events.map((event: any) => event.content)
    assert.isTrue(
      contents.some((content: string) => /telegram connected as helper_bot/.test(content))
    )
    assert.isTrue(contents.some((content: string) => /Message via channel/.test(content)))
  })

  test('the owner allowlist decides who is answered; each sender is rate limited', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await ownerAndAgent()
    const token = telegram.addBot('picky_bot')
    await connectTelegram(client, jwt, agent.id, { botToken: token, allowFrom: ['@grace', 99] })
    await supervisor('instance-a').tick()

    telegram.userSays(token, 'hello from a stranger', { userId: 1, username: 'mallory' })
    telegram.userSays(token, 'hello by handle', { userId: 2, username: 'Grace' })
    telegram.userSays(token, 'hello by id', { userId: 99, username: 'someone' })
    await waitFor('two replies', () => telegram.sent.filter((m) => m.token === token).length >= 2)
    await settle()
    assert.lengthOf(telegram.repliesTo(token, 1), 0, 'a sender not on the list is not answered')
    assert.lengthOf(telegram.repliesTo(token, 2), 1)
    assert.lengthOf(telegram.repliesTo(token, 99), 1)

    for (let index = 0; index < SENDER_MESSAGES_PER_MINUTE + 3; index++) {
      telegram.userSays(token, `flood ${index}`, { userId: 99, username: 'someone' })
    }
    await waitFor('the flood to be handled', async () => {
      const handled = await db
        .from('channel_messages')
        .where('agent_id', agent.id)
        .whereNot('outcome', 'pending')
        .count('* as total')
      return Number(handled[0].total) >= SENDER_MESSAGES_PER_MINUTE + 4
    })
    const limited = await db
      .from('channel_messages')
      .where({ agent_id: agent.id, outcome: 'rate_limited' })
      .count('* as total')
    assert.equal(Number(limited[0].total), 4, 'beyond the per-sender limit nothing is answered')
  })

  test('a sleeping agent is reached on Telegram: answered at once, and woken', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await servingFixtureAgent(client, await owners.create())
    const service = await putToSleep(agent.id)
    assert.isFalse(await service.isRunning(agent.id))

    const token = telegram.addBot('sleepy_bot')
    await connectTelegram(client, jwt, agent.id, { botToken: token })
    await supervisor('instance-a').tick()
    telegram.userSays(token, 'wake up please')
    const [reply] = await waitFor('the reply', () => {
      const sent = telegram.repliesTo(token, 4242)
      return sent.length > 0 && sent
    })
    assert.include(reply.text, 'wake up please')
    await waitFor('the agent to wake', () => service.isRunning(agent.id), 20_000)
  })

  test('two instances race for one bot: one polls, each message is answered once, the other takes over when the holder dies', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await ownerAndAgent()
    const token = telegram.addBot('raced_bot')
    await connectTelegram(client, jwt, agent.id, { botToken: token })
    const first = supervisor('instance-a')
    const second = supervisor('instance-b')
    await Promise.all([first.tick(), second.tick(), first.tick(), second.tick()])
    const holders = [first, second].filter((one) => one.heldIds().length > 0)
    assert.lengthOf(holders, 1, 'exactly one instance holds the connection')
    const [holder] = holders
    const other = holder === first ? second : first

    telegram.userSays(token, 'one')
    await waitFor('the reply', () => telegram.repliesTo(token, 4242).length >= 1)
    await Promise.all([first.tick(), second.tick()])
    assert.lengthOf(other.heldIds(), 0, 'a held lease is not taken')
    assert.equal(telegram.bot(token).conflicts, 0, 'never two pollers at once (no 409)')

    // The holder dies without a word: its lease lapses (shortened here), the other takes over.
    await holder.abandon()
    await db
      .from('agent_channels')
      .where('agent_id', agent.id)
      .update({ lease_expires_at: new Date() })
    await other.tick()
    assert.lengthOf(other.heldIds(), 1)
    const conflictsAtTakeover = telegram.bot(token).conflicts
    telegram.userSays(token, 'two')
    await waitFor('the reply after takeover', () => telegram.repliesTo(token, 4242).length >= 2)
    await settle()
    const replies = telegram.repliesTo(token, 4242)
    assert.lengthOf(replies, 2, 'each message answered once')
    assert.equal(telegram.bot(token).conflicts, conflictsAtTakeover, 'one poller after takeover')
    const status = await statusOf(client, jwt, agent.id)
    assert.equal(status.telegram.state, 'connected')
  })

  test('a revoked token ends in state error with a clear message, and is not retried until it changes', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await ownerAndAgent()
    const token = telegram.addBot('revoked_bot')
    telegram.bot(token).revoked = true
    await connectTelegram(client, jwt, agent.id, { botToken: token })
    const instance = supervisor('instance-a')
    await instance.tick()
    await waitFor('the error state', async () => {
      const status = await statusOf(client, jwt, agent.id)
      return status.telegram.state === 'error'
    })
    const status = await statusOf(client, jwt, agent.id)
    assert.equal(status.telegram.connected, false)
    assert.match(status.telegram.lastError, /refused the bot token/)
    const calls = telegram.callsOf(token, 'getMe')
    await instance.tick()
    await instance.tick()
    assert.equal(telegram.callsOf(token, 'getMe'), calls, 'no retry loop')

    // A new token lifts the halt.
    const fresh = telegram.addBot('renewed_bot')
    await connectTelegram(client, jwt, agent.id, { botToken: fresh })
    await instance.tick()
    await waitFor('the new token to connect', async () => {
      const now = await statusOf(client, jwt, agent.id)
      return now.telegram.state === 'connected' && now.telegram.username === 'renewed_bot'
    })
  })

  test('disconnect-channel removes the token and stops answering; stopping the agent disconnects', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await ownerAndAgent()
    const token = telegram.addBot('leaving_bot')
    await connectTelegram(client, jwt, agent.id, { botToken: token, allowFrom: ['ada'] })
    const instance = supervisor('instance-a')
    await instance.tick()
    await waitFor('polling', () => telegram.bot(token).polling > 0)

    const answer = await client
      .post(`/agents/${agent.id}/disconnect-channel`)
      .bearerToken(jwt)
      .json({ channel: 'telegram' })
    answer.assertStatus(200)
    assert.deepEqual(answer.body().data, { disconnected: 'telegram' })
    await instance.tick()
    const detail = await client.get(`/agents/${agent.id}`).bearerToken(jwt)
    assert.deepEqual(detail.body().data.config.channels.telegram, { allowFrom: ['ada'] })
    assert.deepEqual(detail.body().data.integrations, [])
    const status = await statusOf(client, jwt, agent.id)
    assert.deepEqual(status.telegram, { connected: false, state: 'disconnected', lastError: null })
    await waitFor('polling to stop', () => telegram.bot(token).polling === 0)
    telegram.userSays(token, 'anyone there?')
    await settle(500)
    assert.deepEqual(telegram.repliesTo(token, 4242), [], 'nobody answers')

    // Connected again, then the agent is stopped: the bot goes quiet.
    await connectTelegram(client, jwt, agent.id, { botToken: token })
    await instance.tick()
    await waitFor('polling', () => telegram.bot(token).polling > 0)
    await db.from('agents').where('id', agent.id).update({ status: 'stopped' })
    await instance.tick()
    assert.lengthOf(instance.heldIds(), 0)
    const stopped = await statusOf(client, jwt, agent.id)
    assert.equal(stopped.telegram.state, 'disconnected')
  })

  test('with a public https address the bot uses a webhook (never getUpdates); any instance answers a pushed update', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await ownerAndAgent()
    // Any instance handles a pushed update: this process's own supervisor settings answer it.
    channelsConfig.apiBaseUrls.telegram = telegram.url
    const token = telegram.addBot('hooked_bot')
    await connectTelegram(client, jwt, agent.id, { botToken: token })
    const publicUrl = 'https://agents.example.com'
    const hooked = supervisor('instance-a', { publicUrl })
    await hooked.tick()
    const registered = await waitFor('setWebhook', () => telegram.bot(token).webhookUrl)
    assert.match(
      registered,
      /^https:\/\/agents\.example\.com\/channels\/webhooks\/[0-9a-f-]{36}\/\S{20,}$/
    )
    assert.equal(telegram.callsOf(token, 'getUpdates'), 0)

    // Telegram posts the update to that path; here it reaches this test server.
    const path = new URL(registered).pathname
    const update = {
      update_id: 1,
      message: {
        message_id: 7,
        date: 1,
        from: { id: 55, is_bot: false, first_name: 'Lin' },
        chat: { id: 55, type: 'private', first_name: 'Lin' },
        text: 'pushed hello',
      },
    }
    const pushed = await fetch(`${baseUrl()}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(update),
    })
    assert.equal(pushed.status, 200)
    const [reply] = telegram.repliesTo(token, 55)
    assert.include(reply.text, 'pushed hello')
    assert.equal(reply.replyTo, 7)
    const again = await fetch(`${baseUrl()}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(update),
    })
    assert.equal(again.status, 200)
    assert.lengthOf(telegram.repliesTo(token, 55), 1, 'a retried update is not answered twice')

    const forged = await fetch(`${baseUrl()}${path.replace(/[^/]+$/, 'x'.repeat(32))}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(update),
    })
    assert.equal(forged.status, 404)
    const forgedBody = (await forged.json()) as { success: boolean }
    assert.equal(forgedBody.success, false)

    await client
      .post(`/agents/${agent.id}/disconnect-channel`)
      .bearerToken(jwt)
      .json({ channel: 'telegram' })
    await hooked.tick()
    await waitFor('the webhook to be removed', () => telegram.bot(token).webhookUrl === '')
  })

  test('bad channel input is a 400 and changes nothing', async ({ client, assert }) => {
    const { agent, jwt } = await ownerAndAgent()
    const badToken = await client
      .patch(`/agents/${agent.id}`)
      .bearerToken(jwt)
      .json({ config: { channels: { telegram: { botToken: 'not a token' } } } })
    badToken.assertStatus(400)
    assert.equal(badToken.body().code, 'VALIDATION_ERROR')
    assert.match(badToken.body().error, /botToken/)
    const unknown = await client
      .patch(`/agents/${agent.id}`)
      .bearerToken(jwt)
      .json({ config: { channels: { myspace: { token: 'x' } } } })
    unknown.assertStatus(400)
    const badList = await client
      .patch(`/agents/${agent.id}`)
      .bearerToken(jwt)
      .json({
        config: {
          channels: { telegram: { botToken: telegram.addBot('x_bot'), allowFrom: 'ada' } },
        },
      })
    badList.assertStatus(400)
    assert.match(badList.body().error, /allowFrom/)
    const pairTelegram = await client
      .post(`/agents/${agent.id}/pair-channel`)
      .bearerToken(jwt)
      .json({ channel: 'telegram' })
    pairTelegram.assertStatus(400)
    for (const body of [{ channel: 'signal' }, {}, { channel: 42 }]) {
      const answer = await client
        .post(`/agents/${agent.id}/disconnect-channel`)
        .bearerToken(jwt)
        .json(body)
      answer.assertStatus(400)
    }
    const rows = await db.from('agent_channels').where('agent_id', agent.id)
    assert.lengthOf(rows, 0)
    const stranger = await owners.create()
    const foreign = await client
      .get(`/agents/${agent.id}/channel-status`)
      .bearerToken(jwtFor(stranger))
    foreign.assertStatus(403)
  })
})
