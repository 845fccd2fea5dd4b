import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { generateKeyPairSigner } from '@solana/kit'
import { TOKEN_2022_PROGRAM_ADDRESS } from '#billing/services/solana_rpc'
import { clearPriceCache } from '#billing/services/price_feed'
import { clearScanCache } from '#tools/services/token_scan_service'
import { clearWalletCache } from '#tools/services/wallet_watch_service'
import {
  METAPLEX_METADATA_PROGRAM,
  decodeToken2022Metadata,
  metaplexMetadataAddress,
} from '#tools/services/token_metadata'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { creditsOf, jwtFor } from '#tests/helpers/identity'
import { agentOwners } from '#tests/helpers/agents_http'
import { startModelUpstream, useUpstream, type ModelUpstream } from '#tests/helpers/model_upstream'
import { LocalChain } from '#tests/helpers/solana/local_chain'
import { startSolanaRpc, type SolanaRpcServer } from '#tests/helpers/solana/rpc_server'
import { startPriceFeed, type PriceFeedServer } from '#tests/helpers/solana/price_feed_server'
import { TokenPriceServer } from '#tests/helpers/solana/token_price_server'
import { setPaymentEnv } from '#tests/helpers/solana/payment_env'

const owners = agentOwners()

test.group('Tools: token scan, research and wallet watch', (group) => {
  let chain: LocalChain
  let rpc: SolanaRpcServer
  let tokenPrices: TokenPriceServer
  let solPrice: PriceFeedServer
  let upstream: ModelUpstream
  let restore: Array<() => void> = []

  group.setup(async () => {
    chain = new LocalChain()
    rpc = await startSolanaRpc(chain)
    tokenPrices = await new TokenPriceServer().start()
    solPrice = await startPriceFeed({ solana: 150 })
    upstream = await startModelUpstream()
    restore = [
      setPaymentEnv({
        SOLANA_RPC_URL: rpc.url,
        TOKEN_PRICE_API_URL: tokenPrices.url,
        PRICE_API_URL: solPrice.url,
      }),
      useUpstream(upstream, {
        defaultModel: 'stand-in-model',
        rates: { 'stand-in-model': { input: 1_000_000, output: 1_000_000 } },
      }),
    ]
    await clearPriceCache()
    return async () => {
      for (const undo of restore.reverse()) undo()
      await clearPriceCache()
      await Promise.all([rpc.close(), tokenPrices.close(), solPrice.close(), upstream.close()])
      await owners.removeAgents()
    }
  })
  group.each.setup(async () => {
    await Promise.all([clearScanCache(), clearWalletCache()])
    upstream.reset()
  })

  test('scan-token reads the mint and its Metaplex metadata, prices it and asks the hosted model', async ({
    client,
    assert,
  }) => {
    const owner = await owners.create({ credits: 10_000 })
    const agent = await createAgentFor(owner)
    const jwt = jwtFor(owner)
    const mint = await chain.createMint(6)
    await chain.mintTo(mint, mint.authority.address, 2_500_000_000_000n) // 2.5 M tokens
    chain.setMetaplexMetadata(
      await metaplexMetadataAddress(mint.address),
      mint,
      { name: 'Kite Coin', symbol: 'KITE' },
      METAPLEX_METADATA_PROGRAM
    )
    tokenPrices.prices[mint.address] = { usdPrice: 0.04, decimals: 6 }
    upstream.set({ reply: 'KITE: mint authority still set. Verdict: medium risk.' })

    const response = await client
      .post(`/agents/${agent.id}/scan-token`)
      .bearerToken(jwt)
      .json({ mintAddress: mint.address })
    response.assertStatus(200)
    const data = response.body().data
    assert.equal(data.mintAddress, mint.address)
    assert.equal(data.name, 'Kite Coin')
    assert.equal(data.symbol, 'KITE')
    assert.equal(data.decimals, 6)
    assert.equal(data.price, 0.04)
    assert.equal(data.marketCap, 100_000)
    assert.equal(data.supply, '2500000')
    assert.equal(data.mintAuthority, mint.authority.address)
    assert.equal(data.aiSummary, 'KITE: mint authority still set. Verdict: medium risk.')
    assert.equal(data.model, 'stand-in-model')
    assert.isFalse(Number.isNaN(Date.parse(data.scannedAt)))

    // The model got the facts; the owner paid in AI Credits.
    const modelCall = upstream.requests.find((request) =>
      request.path.endsWith('/chat/completions')
    )!
    const prompt = JSON.stringify(modelCall.body.messages)
    for (const fact of ['Kite Coin', 'KITE', '2500000', '0.04', mint.authority.address]) {
      assert.include(prompt, fact)
    }
    assert.isBelow(await creditsOf(owner), 10_000)
    assert.equal(tokenPrices.requests.at(-1)!.searchParams.get('ids'), mint.address)

    // Cached per mint: a second scan makes no RPC, price or model call (but counts).
    const rpcCalls = rpc.calls.length
    const again = await client
      .post(`/agents/${agent.id}/scan-token`)
      .bearerToken(jwt)
      .json({ mintAddress: mint.address })
    again.assertStatus(200)
    assert.equal(again.body().data.aiSummary, data.aiSummary)
    assert.equal(rpc.calls.length, rpcCalls)
    assert.lengthOf(
      upstream.requests.filter((request) => request.path.endsWith('/chat/completions')),
      1
    )
    const stored = await db.from('token_scans').where('user_id', owner.id)
    assert.lengthOf(stored, 2)
  }).timeout(30_000)

  test('scan-token: 400 for a bad mint, 404 for no mint, 503 unset, 429 after 10 a day', async ({
    client,
    assert,
  }) => {
    const owner = await owners.create({ credits: 10_000 })
    const agent = await createAgentFor(owner)
    const jwt = jwtFor(owner)
    const scan = (body: unknown) =>
      client
        .post(`/agents/${agent.id}/scan-token`)
        .bearerToken(jwt)
        .json(body as object)

    for (const body of [
      {},
      { mintAddress: 12 },
      { mintAddress: 'not-base58-0OIl' },
      { mintAddress: '1111111111111111111111111111111' }, // 31 bytes
      { mintAddress: 'x'.repeat(5000) },
    ]) {
      const bad = await scan(body)
      bad.assertStatus(400)
      assert.equal(bad.body().code, 'VALIDATION_ERROR')
    }

    // A wallet (system account) and an unused address are no mints.
    const wallet = await chain.wallet(1)
    const nobody = await generateKeyPairSigner()
    for (const address of [wallet.address, nobody.address]) {
      const missing = await scan({ mintAddress: address })
      missing.assertStatus(404)
      assert.equal(missing.body().code, 'NOT_FOUND')
    }

    // Unpriced mint: price 0, priceAvailable false, no metadata -> empty name.
    const bare = await chain.createMint(9)
    const unpriced = await scan({ mintAddress: bare.address })
    unpriced.assertStatus(200)
    assert.equal(unpriced.body().data.price, 0)
    assert.isFalse(unpriced.body().data.priceAvailable)
    assert.equal(unpriced.body().data.name, '')

    const undo = setPaymentEnv({ TOKEN_PRICE_API_URL: '' })
    try {
      const unset = await scan({ mintAddress: bare.address })
      unset.assertStatus(503)
      assert.include(unset.body().error, 'TOKEN_PRICE_API_URL')
    } finally {
      undo()
    }

    // The failed scans gave their use back: 1 used so far; 9 more pass, the 11th is refused.
    for (let index = 0; index < 9; index++) {
      const allowed = await scan({ mintAddress: bare.address })
      allowed.assertStatus(200)
    }
    const refused = await scan({ mintAddress: bare.address })
    refused.assertStatus(429)
    assert.equal(refused.body().code, 'RATE_LIMIT_EXCEEDED')
  }).timeout(30_000)

  test('scan-token reads a Token-2022 mint made with its metadata extension', async ({
    client,
    assert,
  }) => {
    const owner = await owners.create({ credits: 10_000 })
    const agent = await createAgentFor(owner)
    const mint = await chain.createToken2022MintWithMetadata(9, {
      name: 'Extension Token',
      symbol: 'EXT',
      uri: 'https://example.com/ext.json',
    })
    await chain.mintTo(mint, mint.authority.address, 7_000_000_000n)
    tokenPrices.prices[mint.address] = { usdPrice: 2, decimals: 9 }
    const response = await client
      .post(`/agents/${agent.id}/scan-token`)
      .bearerToken(jwtFor(owner))
      .json({ mintAddress: mint.address })
    response.assertStatus(200)
    const data = response.body().data
    assert.equal(data.name, 'Extension Token')
    assert.equal(data.symbol, 'EXT')
    assert.equal(data.decimals, 9)
    assert.equal(data.tokenProgram, 'spl-token-2022')
    assert.equal(data.supply, '7')
    assert.equal(data.marketCap, 14)
    // Read from the mint itself: no Metaplex lookup.
    const metaplex = await metaplexMetadataAddress(mint.address)
    assert.isFalse(
      rpc.callsOf('getAccountInfo').some((call) => call.params[0] === metaplex),
      'no Metaplex lookup for a mint carrying its own metadata'
    )
  }).timeout(30_000)

  test('the Token-2022 metadata extension is read from the mint account', ({ assert }) => {
    // Base mint (82) padded to 165, account type 1 (mint), TLV: TokenMetadata (type 19).
    const encode = (text: string) => {
      const bytes = new TextEncoder().encode(text)
      const out = new Uint8Array(4 + bytes.length)
      new DataView(out.buffer).setUint32(0, bytes.length, true)
      out.set(bytes, 4)
      return out
    }
    const value = new Uint8Array([
      ...new Uint8Array(64),
      ...encode('Pointer Token'),
      ...encode('PTR'),
      ...encode('https://example.com/ptr.json'),
      ...new Uint8Array(4),
    ])
    const pointer = new Uint8Array(4 + 64) // MetadataPointer (type 18) comes first
    new DataView(pointer.buffer).setUint16(0, 18, true)
    new DataView(pointer.buffer).setUint16(2, 64, true)
    const header = new Uint8Array(4)
    new DataView(header.buffer).setUint16(0, 19, true)
    new DataView(header.buffer).setUint16(2, value.length, true)
    const data = new Uint8Array([...new Uint8Array(165), 1, ...pointer, ...header, ...value])
    assert.deepEqual(decodeToken2022Metadata(data), { name: 'Pointer Token', symbol: 'PTR' })
    assert.isNull(decodeToken2022Metadata(new Uint8Array(82)))
    assert.equal(TOKEN_2022_PROGRAM_ADDRESS.length, 43)
  })

  test('research answers from the hosted model, is stored and metered; 20 a day', async ({
    client,
    assert,
  }) => {
    const owner = await owners.create({ credits: 10_000 })
    const agent = await createAgentFor(owner)
    const jwt = jwtFor(owner)
    upstream.set({
      reply: 'Token-2022 adds extensions such as transfer fees.',
      model: 'stand-in-model-2025',
    })
    const response = await client
      .post(`/agents/${agent.id}/research`)
      .bearerToken(jwt)
      .json({ query: 'What does Token-2022 add?' })
    response.assertStatus(200)
    const data = response.body().data
    assert.equal(data.query, 'What does Token-2022 add?')
    assert.equal(data.result, 'Token-2022 adds extensions such as transfer fees.')
    assert.equal(data.model, 'stand-in-model-2025')
    assert.isFalse(Number.isNaN(Date.parse(data.completedAt)))
    const call = upstream.requests.find((request) => request.path.endsWith('/chat/completions'))!
    assert.include(JSON.stringify(call.body.messages), 'What does Token-2022 add?')
    assert.isBelow(await creditsOf(owner), 10_000)
    const stored = await db.from('research_tasks').where('user_id', owner.id).firstOrFail()
    assert.equal(stored.result, data.result)
    assert.equal(stored.model, 'stand-in-model-2025')

    for (const body of [
      {},
      { query: '' },
      { query: 'a\u0000b' },
      { query: 'x'.repeat(4001) },
      { query: ['a'] },
    ]) {
      const bad = await client.post(`/agents/${agent.id}/research`).bearerToken(jwt).json(body)
      bad.assertStatus(400)
      assert.equal(bad.body().code, 'VALIDATION_ERROR')
    }

    // 19 more today, then 429.
    await db.table('research_tasks').multiInsert(
      Array.from({ length: 19 }, () => ({
        id: crypto.randomUUID(),
        user_id: owner.id,
        query: 'earlier',
        created_at: new Date(),
      }))
    )
    const refused = await client
      .post(`/agents/${agent.id}/research`)
      .bearerToken(jwt)
      .json({ query: 'one more' })
    refused.assertStatus(429)
    assert.equal(refused.body().code, 'RATE_LIMIT_EXCEEDED')
  }).timeout(30_000)

  test('wallet-watch: replaces the set, answers balances and classified transactions from one RPC round', async ({
    client,
    assert,
  }) => {
    const owner = await owners.create()
    const agent = await createAgentFor(owner)
    const jwt = jwtFor(owner)
    const watched = await chain.wallet(2)
    const friend = await chain.wallet(5)
    const incoming = await chain.transferSol({
      from: friend,
      to: watched.address,
      lamports: 1_500_000_000n,
    })
    const outgoing = await chain.transferSol({
      from: watched,
      to: friend.address,
      lamports: 250_000_000n,
    })
    const mint = await chain.createMint(6)
    const tokenOnly = await chain.mintTo(mint, watched.address, 1000n) // pays nothing: `other`

    const empty = await client.get(`/agents/${agent.id}/wallet-watch`).bearerToken(jwt)
    empty.assertStatus(200)
    assert.deepEqual(empty.body().data, { watchedWallets: [] })

    for (const wallets of [
      [],
      ['nope'],
      [watched.address, 'x'],
      Array(4).fill(watched.address),
      'abc',
    ]) {
      const bad = await client
        .post(`/agents/${agent.id}/wallet-watch`)
        .bearerToken(jwt)
        .json({ wallets })
      bad.assertStatus(400)
      assert.equal(bad.body().code, 'VALIDATION_ERROR')
    }

    const other = await generateKeyPairSigner()
    await client
      .post(`/agents/${agent.id}/wallet-watch`)
      .bearerToken(jwt)
      .json({ wallets: [other.address] })
    const set = await client
      .post(`/agents/${agent.id}/wallet-watch`)
      .bearerToken(jwt)
      .json({ wallets: [watched.address] })
    set.assertStatus(200)
    assert.deepEqual(set.body().data.wallets, [watched.address])

    const before = rpc.calls.length
    const response = await client.get(`/agents/${agent.id}/wallet-watch`).bearerToken(jwt)
    response.assertStatus(200)
    const [wallet] = response.body().data.watchedWallets
    assert.lengthOf(response.body().data.watchedWallets, 1, 'the POST replaced the first set')
    assert.equal(wallet.address, watched.address)
    const lamportsNow = Number(chain.balance(watched.address))
    assert.equal(wallet.balance.sol, lamportsNow / 1e9)
    assert.equal(wallet.balance.usd, Math.round((lamportsNow / 1e9) * 150 * 100) / 100)
    const bySignature = new Map(wallet.transactions.map((tx: any) => [tx.signature, tx]))
    assert.deepInclude(bySignature.get(incoming.signature), { type: 'in', amount: 1.5 })
    assert.deepInclude(bySignature.get(outgoing.signature), { type: 'out', amount: 0.25 })
    assert.deepInclude(bySignature.get(tokenOnly.signature), { type: 'other', amount: 0 })
    assert.equal((bySignature.get(incoming.signature) as any).ts, incoming.blockTime)
    assert.equal(wallet.transactions[0].signature, tokenOnly.signature, 'newest first')

    // One round: getBalance, getSignaturesForAddress, one getTransaction per signature.
    const round = rpc.calls.slice(before)
    assert.lengthOf(
      round.filter((call) => call.method === 'getBalance'),
      1
    )
    assert.lengthOf(
      round.filter((call) => call.method === 'getSignaturesForAddress'),
      1
    )
    assert.lengthOf(
      round.filter((call) => call.method === 'getTransaction'),
      3
    )
    // A second page load comes from the cache.
    const cachedCalls = rpc.calls.length
    const reload = await client.get(`/agents/${agent.id}/wallet-watch`).bearerToken(jwt)
    reload.assertStatus(200)
    assert.deepEqual(reload.body().data, response.body().data)
    assert.equal(rpc.calls.length, cachedCalls)
  }).timeout(30_000)
})
