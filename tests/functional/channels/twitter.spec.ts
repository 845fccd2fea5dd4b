import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import {
  channelStatusOf,
  channelSupervisor,
  channelTestGroup,
  configureChannel,
  settle,
  waitForChannelState,
} from '#tests/helpers/channels'
import { FakeTwitter, type FakeAccount } from '#tests/helpers/fake_twitter'
import { waitFor } from '#tests/helpers/runtime'

/**
 * X end to end: the real twitter-api-v2 client inside the twitter plugin
 * signs OAuth 1.0a requests to a local X API v2 stand-in that verifies the
 * signatures (tests/helpers/fake_twitter.ts).
 */
let x: FakeTwitter
const previousPoll = process.env.TWITTER_POLL_MS

function credentials(account: FakeAccount) {
  const { apiKey, apiSecret, accessToken, accessSecret } = account
  return { apiKey, apiSecret, accessToken, accessSecret }
}

function supervisor(holder: string) {
  return channelSupervisor(holder, { apiBaseUrls: { twitter: x.url } })
}

test.group('Channels: twitter', (group) => {
  const { ownerAndAgent } = channelTestGroup(group)
  group.setup(async () => {
    process.env.TWITTER_POLL_MS = '100'
    x = await new FakeTwitter().start()
  })
  group.teardown(async () => {
    if (previousPoll === undefined) delete process.env.TWITTER_POLL_MS
    else process.env.TWITTER_POLL_MS = previousPoll
    await x.close()
  })

  test('signed credentials connect; a mention is answered as a reply, a long answer as a thread; older mentions are left alone', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await ownerAndAgent()
    const account = x.addAccount('helper_agent')
    const old = x.mention(account, 'an old question from before')
    const patched = await configureChannel(client, jwt, agent.id, 'twitter', credentials(account))
    assert.equal(patched.body().data.config.channels.twitter.accessSecret, '***')

    await supervisor('instance-a').tick()
    await waitForChannelState(client, jwt, agent.id, 'twitter', 'connected')
    const status = await channelStatusOf(client, jwt, agent.id)
    assert.deepEqual(status.twitter, {
      connected: true,
      handle: '@helper_agent',
      state: 'connected',
      lastError: null,
    })
    const detail = await client.get(`/agents/${agent.id}`).bearerToken(jwt)
    assert.include(detail.body().data.integrations, 'twitter')

    const question = x.mention(
      account,
      `what time is it in Tokyo? ${'Please answer with care and in detail. '.repeat(4)}`
    )
    const [reply] = await waitFor('the reply', () => {
      const replies = x.repliesTo(question.id)
      return replies.length > 0 && replies
    })
    assert.equal(reply.author_id, account.id)
    // The local model quotes the question; its notice makes the answer longer than one post.
    // Each post of the thread answers the one before, so they arrive one after another.
    const thread = await waitFor('a long answer threaded', () => {
      const posts = x.thread(question.id)
      return posts.length > 1 && posts
    })
    assert.isTrue(thread.every((post) => post.text.length <= 280))
    assert.include(thread.map((post) => post.text).join(' '), 'what time is it in Tokyo?')
    await settle()
    assert.lengthOf(x.repliesTo(old.id), 0, 'a mention from before the connection is not answered')
    assert.equal(x.badSignatures, 0, 'every request was signed correctly')
  })

  test('two instances: one polls, each mention is answered once, and a takeover continues from the stored cursor', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await ownerAndAgent({ sleeping: true })
    const account = x.addAccount('raced_agent')
    await configureChannel(client, jwt, agent.id, 'twitter', credentials(account))
    const first = supervisor('instance-a')
    const second = supervisor('instance-b')
    await Promise.all([first.tick(), second.tick()])
    const [holder] = [first, second].filter((one) => one.heldIds().length > 0)
    const other = holder === first ? second : first
    assert.lengthOf(other.heldIds(), 0)
    await waitForChannelState(client, jwt, agent.id, 'twitter', 'connected')

    const one = x.mention(account, 'first question', { id: '777', username: 'grace' })
    await waitFor('the first reply', () => x.repliesTo(one.id).length > 0)

    await holder.abandon()
    await db
      .from('agent_channels')
      .where('agent_id', agent.id)
      .update({ lease_expires_at: new Date() })
    const two = x.mention(account, 'second question', { id: '777', username: 'grace' })
    await other.tick()
    await waitFor('the reply after takeover', () => x.repliesTo(two.id).length > 0)
    await settle()
    assert.lengthOf(x.repliesTo(one.id), 1, 'the first mention was not answered again')
    assert.lengthOf(x.repliesTo(two.id), 1)
    const answered = await db
      .from('channel_messages')
      .where({ agent_id: agent.id, channel: 'twitter', outcome: 'answered' })
    assert.lengthOf(answered, 2, 'a sleeping agent answered both')
  })

  test('refused credentials end in state error without retries; disconnect-channel removes them', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await ownerAndAgent()
    const account = x.addAccount('revoked_agent')
    account.revoked = true
    await configureChannel(client, jwt, agent.id, 'twitter', credentials(account))
    const instance = supervisor('instance-a')
    await instance.tick()
    await waitForChannelState(client, jwt, agent.id, 'twitter', 'error')
    const status = await channelStatusOf(client, jwt, agent.id)
    assert.match(status.twitter.lastError, /X refused the credentials/)
    await instance.tick()
    assert.lengthOf(instance.heldIds(), 0, 'not retried')

    const missing = await client
      .patch(`/agents/${agent.id}`)
      .bearerToken(jwt)
      .json({ config: { channels: { twitter: { apiKey: 'only-one', apiSecret: null } } } })
    missing.assertStatus(400)
    assert.match(missing.body().error, /apiSecret is required/)

    const answer = await client
      .post(`/agents/${agent.id}/disconnect-channel`)
      .bearerToken(jwt)
      .json({ channel: 'twitter' })
    answer.assertStatus(200)
    const detail = await client.get(`/agents/${agent.id}`).bearerToken(jwt)
    assert.notProperty(detail.body().data.config.channels ?? {}, 'twitter')
    const after = await channelStatusOf(client, jwt, agent.id)
    assert.deepEqual(after.twitter, { connected: false, state: 'disconnected', lastError: null })
  })

  test('a token revoked while polling ends in state error; disconnecting a connected channel stops the answers', async ({
    client,
    assert,
  }) => {
    const instance = supervisor('instance-a')
    const revokedLater = await ownerAndAgent()
    const revokedAccount = x.addAccount('revoked_later')
    await configureChannel(
      client,
      revokedLater.jwt,
      revokedLater.agent.id,
      'twitter',
      credentials(revokedAccount)
    )
    const kept = await ownerAndAgent()
    const keptAccount = x.addAccount('disconnected_later')
    await configureChannel(client, kept.jwt, kept.agent.id, 'twitter', credentials(keptAccount))
    await instance.tick()
    for (const { agent, jwt } of [revokedLater, kept]) {
      await waitForChannelState(client, jwt, agent.id, 'twitter', 'connected')
    }

    revokedAccount.revoked = true
    await waitForChannelState(client, revokedLater.jwt, revokedLater.agent.id, 'twitter', 'error')
    const revokedStatus = await channelStatusOf(client, revokedLater.jwt, revokedLater.agent.id)
    assert.match(revokedStatus.twitter.lastError, /X refused the credentials/)

    const answer = await client
      .post(`/agents/${kept.agent.id}/disconnect-channel`)
      .bearerToken(kept.jwt)
      .json({ channel: 'twitter' })
    answer.assertStatus(200)
    await instance.tick()
    assert.lengthOf(instance.heldIds(), 0, 'neither connection is held any more')
    const late = x.mention(keptAccount, 'anyone there after the disconnect?')
    await settle()
    assert.lengthOf(x.repliesTo(late.id), 0, 'no answers after disconnect')
    const status = await channelStatusOf(client, kept.jwt, kept.agent.id)
    assert.equal(status.twitter.state, 'disconnected')
  })
})
