import { test } from '@japa/runner'
import { LocalChain } from '#tests/helpers/solana/local_chain'
import { startSolanaRpc, type SolanaRpcServer } from '#tests/helpers/solana/rpc_server'
import { startPriceFeed, type PriceFeedServer } from '#tests/helpers/solana/price_feed_server'
import { TokenPriceServer } from '#tests/helpers/solana/token_price_server'
import { startServerProcess, waitFor, type ServerProcess } from '#tests/helpers/processes'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'
import { startThrowawayRedis, type ThrowawayRedis } from '#tests/helpers/throwaway_redis'

/**
 * Two instances of the service on one PostgreSQL (and, in the second
 * group, one Redis): a wallet view or a token scan fetched by one is
 * answered by the other from the shared cache, with no RPC call of its own.
 */
for (const backend of ['PostgreSQL', 'Redis'] as const) {
  test.group(`Tools caches shared across instances (${backend})`, (group) => {
    let chain: LocalChain
    let rpc: SolanaRpcServer
    let tokenPrices: TokenPriceServer
    let solPrice: PriceFeedServer
    let redis: ThrowawayRedis | undefined
    let first: ServiceUnderFault
    let second: ServerProcess

    group.setup(async () => {
      chain = new LocalChain()
      rpc = await startSolanaRpc(chain)
      tokenPrices = await new TokenPriceServer().start()
      solPrice = await startPriceFeed({ solana: 150 })
      redis = backend === 'Redis' ? await startThrowawayRedis() : undefined
      const env = {
        SOLANA_RPC_URL: rpc.url,
        TOKEN_PRICE_API_URL: tokenPrices.url,
        PRICE_API_URL: solPrice.url,
        REDIS_URL: redis?.url,
      }
      first = await startServiceUnderFault(env)
      second = await startServerProcess({
        ...env,
        DATABASE_URL: first.postgres.url,
        STORAGE_DIR: first.storage,
        LOG_LEVEL: 'warn',
      })
      await waitFor(
        async () => {
          const answer = await fetch(`${second.url}/health`).catch(() => undefined)
          return answer?.status === 200 ? true : undefined
        },
        { timeoutMs: 90_000, what: `the second instance to serve:\n${second.output()}` }
      )
      return async () => {
        await second.stop()
        await first.destroy()
        await redis?.destroy()
        await Promise.all([rpc.close(), tokenPrices.close(), solPrice.close()])
      }
    })

    test('a wallet view and a token scan fetched on one instance are reused by the other', async ({
      assert,
    }) => {
      const token = await first.signUp()
      const agentId = await first.createFixtureAgent(token, 'Watcher')
      const watched = await chain.wallet(2)
      const friend = await chain.wallet(1)
      await chain.transferSol({ from: friend, to: watched.address, lamports: 500_000_000n })
      const mint = await chain.createMint(6)
      await chain.mintTo(mint, mint.authority.address, 1_000_000_000n)
      tokenPrices.prices[mint.address] = { usdPrice: 0.5, decimals: 6 }

      const set = await first.call(`/agents/${agentId}/wallet-watch`, {
        method: 'POST',
        token,
        json: { wallets: [watched.address] },
      })
      assert.equal(set.status, 200, JSON.stringify(set.body))

      const call = async (base: string, path: string, init: RequestInit = {}) => {
        const response = await fetch(`${base}${path}`, {
          ...init,
          headers: { 'authorization': `Bearer ${token}`, 'content-type': 'application/json' },
        })
        return { status: response.status, body: (await response.json()) as any }
      }

      const beforeWallet = rpc.calls.length
      const onFirst = await call(first.server.url, `/agents/${agentId}/wallet-watch`)
      assert.equal(onFirst.status, 200, JSON.stringify(onFirst.body))
      assert.isAbove(rpc.calls.length, beforeWallet, 'the first instance read the chain')
      const afterFirst = rpc.calls.length
      const onSecond = await call(second.url, `/agents/${agentId}/wallet-watch`)
      assert.equal(onSecond.status, 200, JSON.stringify(onSecond.body))
      assert.deepEqual(onSecond.body.data, onFirst.body.data)
      assert.equal(rpc.calls.length, afterFirst, 'the second instance made no RPC call')

      const scan = (base: string) =>
        call(base, `/agents/${agentId}/scan-token`, {
          method: 'POST',
          body: JSON.stringify({ mintAddress: mint.address }),
        })
      const scanned = await scan(first.server.url)
      assert.equal(scanned.status, 200, JSON.stringify(scanned.body))
      const afterScan = rpc.calls.length
      const rescanned = await scan(second.url)
      assert.equal(rescanned.status, 200, JSON.stringify(rescanned.body))
      assert.equal(rescanned.body.data.scannedAt, scanned.body.data.scannedAt, 'the cached scan')
      assert.equal(rpc.calls.length, afterScan, 'the second instance made no RPC call')

      if (redis) {
        assert.isNotEmpty(await redis.keys('cache:tools:*'), 'kept in Redis')
      }
      const removed = await first.call(`/agents/${agentId}`, { method: 'DELETE', token })
      assert.equal(removed.status, 200, JSON.stringify(removed.body))
    }).timeout(180_000)
  })
}
