import { test } from '@japa/runner'
import {
  createSignableMessage,
  generateKeyPairSigner,
  getBase58Decoder,
  type KeyPairSigner,
} from '@solana/kit'
import { appUrl } from '#config/app'
import WalletNonce from '#billing/models/wallet_nonce'
import { apiKeyFor, createUser, jwtFor, reloadUser } from '#tests/helpers/identity'

/** The wallet's signMessage of the challenge text, base58 (what wallet adapters return). */
async function sign(wallet: KeyPairSigner, message: string): Promise<string> {
  const [signatures] = await wallet.signMessages([createSignableMessage(message)])
  return getBase58Decoder().decode(signatures[wallet.address])
}

async function challenge(client: any, jwt: string) {
  const response = await client.post('/auth/wallet/nonce').bearerToken(jwt)
  response.assertStatus(200)
  return response.body().data as { nonce: string; message: string; expiresAt: string }
}

function link(client: any, jwt: string, body: Record<string, unknown>) {
  return client.post('/auth/wallet').bearerToken(jwt).json(body)
}

async function walletOf(user: { id: string }) {
  const fresh = await reloadUser(user)
  return fresh.walletAddress
}

test.group('Wallet linking', () => {
  test('a wallet that signs the challenge is linked and shown by /api/v1/me', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const jwt = jwtFor(user)
    const wallet = await generateKeyPairSigner()

    const issued = await challenge(client, jwt)
    // The message names the service, the account and the nonce.
    assert.include(issued.message, 'Agent Host')
    assert.include(issued.message, appUrl)
    assert.include(issued.message, user.id)
    assert.include(issued.message, user.username)
    assert.include(issued.message, issued.nonce)
    const ttl = new Date(issued.expiresAt).getTime() - Date.now()
    assert.isAbove(ttl, 9 * 60_000)
    assert.isAtMost(ttl, 10 * 60_000)

    const linked = await client
      .post('/auth/wallet')
      .bearerToken(jwt)
      .json({ address: wallet.address, signature: await sign(wallet, issued.message) })
    linked.assertStatus(200)
    assert.deepEqual(linked.body().data, { walletAddress: wallet.address })

    const me = await client.get('/api/v1/me').bearerToken(await apiKeyFor(user))
    me.assertStatus(200)
    assert.equal(me.body().data.walletAddress, wallet.address)
  })

  test('the nonce is single-use: the same signature cannot link again', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const jwt = jwtFor(user)
    const wallet = await generateKeyPairSigner()
    const issued = await challenge(client, jwt)
    const body = { address: wallet.address, signature: await sign(wallet, issued.message) }
    const first = await link(client, jwt, body)
    first.assertStatus(200)

    const again = await client.post('/auth/wallet').bearerToken(jwt).json(body)
    again.assertStatus(400)
    again.assertBodyContains({ code: 'VALIDATION_ERROR' })
    assert.match(again.body().error, /challenge/i)
  })

  test('refuses a signature by another key, of another message, or of an expired challenge', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const jwt = jwtFor(user)
    const wallet = await generateKeyPairSigner()
    const intruder = await generateKeyPairSigner()
    const issued = await challenge(client, jwt)

    // Signed by another key, claimed for this address.
    const wrongKey = await client
      .post('/auth/wallet')
      .bearerToken(jwt)
      .json({ address: wallet.address, signature: await sign(intruder, issued.message) })
    wrongKey.assertStatus(400)
    assert.match(wrongKey.body().error, /signature/i)

    // A message naming another account (or nothing) does not link this one.
    const forged = issued.message.replace(user.id, '00000000-0000-4000-8000-000000000000')
    const otherMessage = await client
      .post('/auth/wallet')
      .bearerToken(jwt)
      .json({ address: wallet.address, signature: await sign(wallet, forged) })
    otherMessage.assertStatus(400)

    // A newer challenge replaces the older one.
    const newer = await challenge(client, jwt)
    const stale = await client
      .post('/auth/wallet')
      .bearerToken(jwt)
      .json({ address: wallet.address, signature: await sign(wallet, issued.message) })
    stale.assertStatus(400)

    // After 10 minutes the challenge is dead.
    await WalletNonce.query()
      .where('nonce', newer.nonce)
      .update({ expires_at: new Date(Date.now() - 1000) })
    const expired = await client
      .post('/auth/wallet')
      .bearerToken(jwt)
      .json({ address: wallet.address, signature: await sign(wallet, newer.message) })
    expired.assertStatus(400)
    assert.match(expired.body().error, /expired|pending/i)

    assert.isNull(await walletOf(user))
  })

  test('a wallet links to one account only (400), and an account may replace its wallet', async ({
    client,
    assert,
  }) => {
    const alice = await createUser()
    const bob = await createUser()
    const wallet = await generateKeyPairSigner()
    const aliceChallenge = await challenge(client, jwtFor(alice))
    const linked = await link(client, jwtFor(alice), {
      address: wallet.address,
      signature: await sign(wallet, aliceChallenge.message),
    })
    linked.assertStatus(200)

    const bobChallenge = await challenge(client, jwtFor(bob))
    const taken = await client
      .post('/auth/wallet')
      .bearerToken(jwtFor(bob))
      .json({ address: wallet.address, signature: await sign(wallet, bobChallenge.message) })
    taken.assertStatus(400)
    taken.assertBodyContains({ code: 'VALIDATION_ERROR' })
    assert.isNull(await walletOf(bob))

    const next = await generateKeyPairSigner()
    const again = await challenge(client, jwtFor(alice))
    const replaced = await link(client, jwtFor(alice), {
      address: next.address,
      signature: await sign(next, again.message),
    })
    replaced.assertStatus(200)
    assert.equal(await walletOf(alice), next.address)
  })

  test('malformed input is 400; no JWT is 401', async ({ client }) => {
    const user = await createUser()
    const jwt = jwtFor(user)
    await challenge(client, jwt)
    const badAddress = await link(client, jwt, { address: 'nope', signature: 'x'.repeat(88) })
    badAddress.assertStatus(400)
    const wallet = await generateKeyPairSigner()
    const badSignature = await link(client, jwt, {
      address: wallet.address,
      signature: '1'.repeat(88),
    })
    badSignature.assertStatus(400)
    const noJwtNonce = await client.post('/auth/wallet/nonce')
    noJwtNonce.assertStatus(401)
    const noJwtLink = await client.post('/auth/wallet').json({})
    noJwtLink.assertStatus(401)
  })
})
