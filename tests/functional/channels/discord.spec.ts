import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { GatewayIntentBits } from '@discordjs/core'
import {
  channelStatusOf,
  channelSupervisor,
  channelTestGroup,
  configureChannel,
  settle,
  waitForChannelState,
} from '#tests/helpers/channels'
import { FakeDiscord } from '#tests/helpers/fake_discord'
import { waitFor } from '#tests/helpers/runtime'

/**
 * Discord end to end: the real @discordjs/core, ws and rest clients inside
 * the discord plugin talk to a local REST and gateway stand-in
 * (tests/helpers/fake_discord.ts).
 */
let discord: FakeDiscord

function supervisor(holder: string) {
  return channelSupervisor(holder, { apiBaseUrls: { discord: discord.url } })
}

test.group('Channels: discord', (group) => {
  const { ownerAndAgent } = channelTestGroup(group)
  group.setup(async () => {
    discord = await new FakeDiscord().start()
  })
  group.teardown(async () => {
    await discord.close()
  })

  test('a bot token connects to the gateway with the message intents; a DM and a mention are answered as replies, once', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await ownerAndAgent({ sleeping: true })
    const bot = discord.addBot('helper-bot')
    await configureChannel(client, jwt, agent.id, 'discord', { botToken: bot.token })
    await supervisor('instance-a').tick()
    await waitForChannelState(client, jwt, agent.id, 'discord', 'connected')
    const [identify] = discord.identifies.filter((call) => call.token === bot.token)
    assert.equal(
      identify.intents & GatewayIntentBits.MessageContent,
      GatewayIntentBits.MessageContent
    )
    assert.equal(
      identify.intents & GatewayIntentBits.DirectMessages,
      GatewayIntentBits.DirectMessages
    )
    const status = await channelStatusOf(client, jwt, agent.id)
    assert.deepEqual(status.discord, {
      connected: true,
      username: 'helper-bot',
      state: 'connected',
      lastError: null,
    })
    const detail = await client.get(`/agents/${agent.id}`).bearerToken(jwt)
    assert.include(detail.body().data.integrations, 'discord')

    const dm = discord.userSays(bot, 'hello in private', { channelId: '901' })
    const [reply] = await waitFor('the DM reply', () => {
      const posted = discord.postedTo(bot, '901')
      return posted.length > 0 && posted
    })
    assert.include(reply.content, 'hello in private', 'the agent (asleep) answered this message')
    assert.equal(reply.replyTo, dm.id)
    assert.include(discord.typing, '901')

    discord.userSays(bot, 'chatter not for the bot', { channelId: '950', guildId: '77' })
    const mention = discord.userSays(bot, 'what do you think?', {
      channelId: '951',
      guildId: '77',
      mention: true,
    })
    const [answer] = await waitFor('the mention reply', () => {
      const posted = discord.postedTo(bot, '951')
      return posted.length > 0 && posted
    })
    assert.include(answer.content, 'what do you think?')
    assert.notInclude(answer.content, `<@${bot.id}>`, 'the mention is not part of the message')
    assert.equal(answer.replyTo, mention.id)

    // The same message delivered again (a resumed session replays it): not answered twice.
    discord.dispatch(bot, 'MESSAGE_CREATE', { ...mention })
    await settle()
    assert.lengthOf(discord.postedTo(bot, '951'), 1)
    assert.lengthOf(discord.postedTo(bot, '950'), 0, 'server chatter without a mention is ignored')
  })

  test('two instances: one gateway session per bot, each message answered once, takeover when the holder dies', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await ownerAndAgent()
    const bot = discord.addBot('raced-bot')
    await configureChannel(client, jwt, agent.id, 'discord', { botToken: bot.token })
    const first = supervisor('instance-a')
    const second = supervisor('instance-b')
    await Promise.all([first.tick(), second.tick()])
    await waitFor('a session', () => discord.sessionsOf(bot) === 1)
    await Promise.all([first.tick(), second.tick()])
    assert.equal(discord.identifies.filter((call) => call.token === bot.token).length, 1)
    const [holder] = [first, second].filter((one) => one.heldIds().length > 0)
    const other = holder === first ? second : first

    discord.userSays(bot, 'one', { channelId: '902' })
    await waitFor('the reply', () => discord.postedTo(bot, '902').length >= 1)
    await holder.abandon()
    await waitFor('the dead session to close', () => discord.sessionsOf(bot) === 0)
    await db
      .from('agent_channels')
      .where('agent_id', agent.id)
      .update({ lease_expires_at: new Date() })
    await other.tick()
    await waitFor('the new session', () => discord.sessionsOf(bot) === 1)
    await waitForChannelState(client, jwt, agent.id, 'discord', 'connected')
    discord.userSays(bot, 'two', { channelId: '902' })
    await waitFor('the reply after takeover', () => discord.postedTo(bot, '902').length >= 2)
    await settle()
    assert.lengthOf(discord.postedTo(bot, '902'), 2)
  })

  test('a revoked token ends in state error without retries; the allowlist and disconnect-channel are honoured', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await ownerAndAgent()
    const revoked = discord.addBot('revoked-bot')
    revoked.revoked = true
    await configureChannel(client, jwt, agent.id, 'discord', { botToken: revoked.token })
    const instance = supervisor('instance-a')
    await instance.tick()
    await waitForChannelState(client, jwt, agent.id, 'discord', 'error')
    const status = await channelStatusOf(client, jwt, agent.id)
    assert.match(status.discord.lastError, /Discord refused the bot token/)
    const calls = discord.restCalls.filter((call) => call.token === revoked.token).length
    await instance.tick()
    await settle()
    assert.equal(discord.restCalls.filter((call) => call.token === revoked.token).length, calls)

    const bot = discord.addBot('picky-bot')
    await configureChannel(client, jwt, agent.id, 'discord', {
      botToken: bot.token,
      allowFrom: ['grace'],
    })
    await instance.tick()
    await waitFor('a session', () => discord.sessionsOf(bot) === 1)
    await waitForChannelState(client, jwt, agent.id, 'discord', 'connected')
    discord.userSays(bot, 'from ada, not on the list', { channelId: '903' })
    await settle()
    assert.lengthOf(discord.postedTo(bot, '903'), 0)

    await client
      .post(`/agents/${agent.id}/disconnect-channel`)
      .bearerToken(jwt)
      .json({ channel: 'discord' })
      .then((answer) => answer.assertStatus(200))
    await instance.tick()
    await waitFor('the session to end', () => discord.sessionsOf(bot) === 0)
    const after = await channelStatusOf(client, jwt, agent.id)
    assert.equal(after.discord.state, 'disconnected')
  })
})
