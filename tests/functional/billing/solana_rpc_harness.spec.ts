import { randomBytes } from 'node:crypto'
import { test } from '@japa/runner'
import {
  appendTransactionMessageInstructions,
  createSolanaRpc,
  createTransactionMessage,
  decodeTransactionFromRpcResponse,
  generateKeyPairSigner,
  getBase58Decoder,
  getBase64EncodedWireTransaction,
  getSignatureFromTransaction,
  isSolanaError,
  lamports,
  pipe,
  setTransactionMessageFeePayerSigner,
  setTransactionMessageLifetimeUsingBlockhash,
  signTransactionMessageWithSigners,
  signature as toSignature,
  type Address,
  type Rpc,
  type SolanaRpcApi,
} from '@solana/kit'
import { getTransferSolInstruction } from '@solana-program/system'
import { getMintDecoder, TOKEN_PROGRAM_ADDRESS } from '@solana-program/token'
import { LocalChain, type Mint } from '#tests/helpers/solana/local_chain'
import { startSolanaRpc, type SolanaRpcServer } from '#tests/helpers/solana/rpc_server'

/**
 * The local RPC node answers @solana/kit's real client in a node's shapes,
 * from transactions really signed and executed by LiteSVM.
 */
test.group('Solana RPC test harness', (group) => {
  let chain: LocalChain
  let server: SolanaRpcServer
  let rpc: Rpc<SolanaRpcApi>
  let usdc: Mint
  let treasury: Address

  group.setup(async () => {
    chain = new LocalChain()
    server = await startSolanaRpc(chain)
    rpc = createSolanaRpc(server.url)
    usdc = await chain.createMint(6)
    // Funded: a transfer into an account below the rent-exempt minimum fails, as on a real cluster.
    const signer = await chain.wallet(1)
    treasury = signer.address
    return () => server.close()
  })

  test('jsonParsed: a USDC transfer creating the recipient token account, with a memo', async ({
    assert,
  }) => {
    const payer = await chain.wallet(1)
    await chain.mintTo(usdc, payer.address, 5_000_000n)
    const tx = await chain.transferToken({
      mint: usdc,
      from: payer,
      toOwner: treasury,
      amount: 1_250_000n,
      memo: 'order 42',
    })
    const ata = await chain.associatedTokenAddress(treasury, usdc)
    const source = await chain.associatedTokenAddress(payer.address, usdc)

    const result = await rpc
      .getTransaction(toSignature(tx.signature), {
        encoding: 'jsonParsed',
        maxSupportedTransactionVersion: 0,
      })
      .send()
    assert.isNotNull(result)
    const { transaction, meta } = result!
    assert.equal(result!.version, 0)
    assert.equal(transaction.signatures[0], tx.signature)
    const keys = transaction.message.accountKeys
    assert.deepEqual(keys[0], {
      pubkey: payer.address,
      signer: true,
      source: 'transaction',
      writable: true,
    })
    const ataKey = keys.find((key) => key.pubkey === ata)!
    assert.isFalse(ataKey.signer)
    assert.isTrue(ataKey.writable)
    assert.isFalse(keys.find((key) => key.pubkey === TOKEN_PROGRAM_ADDRESS)!.writable)

    const instructions = transaction.message.instructions as any[]
    assert.deepEqual(
      instructions.map((ix) => ix.program),
      ['spl-associated-token-account', 'spl-token', 'spl-memo']
    )
    assert.equal(instructions[0].parsed.type, 'createIdempotent')
    assert.equal(instructions[0].parsed.info.account, ata)
    assert.equal(instructions[0].parsed.info.wallet, treasury)
    assert.deepEqual(instructions[1].parsed, {
      type: 'transferChecked',
      info: {
        source,
        mint: usdc.address,
        destination: ata,
        authority: payer.address,
        // kit turns integers outside its known numeric paths into bigints.
        tokenAmount: { amount: '1250000', decimals: 6n, uiAmount: 1.25, uiAmountString: '1.25' },
      },
    })
    assert.equal(instructions[2].parsed, 'order 42')

    // The ATA program's CPIs, parsed, one level down.
    const inner = meta!.innerInstructions as any[]
    assert.equal(inner[0].index, 0)
    assert.includeMembers(
      inner[0].instructions.map((ix: any) => ix.parsed?.type),
      ['getAccountDataSize', 'createAccount', 'initializeImmutableOwner', 'initializeAccount3']
    )
    assert.isTrue(inner[0].instructions.every((ix: any) => ix.stackHeight === 2))

    // Token balances: the new account has no pre balance.
    const index = keys.findIndex((key) => key.pubkey === ata)
    assert.isUndefined(meta!.preTokenBalances!.find((b) => b.accountIndex === index))
    assert.deepEqual(
      meta!.postTokenBalances!.find((b) => b.accountIndex === index),
      {
        accountIndex: index,
        mint: usdc.address,
        owner: treasury,
        programId: TOKEN_PROGRAM_ADDRESS,
        uiTokenAmount: { amount: '1250000', decimals: 6, uiAmount: 1.25, uiAmountString: '1.25' },
      }
    )
    assert.isNull(meta!.err)
    assert.deepEqual(meta!.status, { Ok: null })
    assert.isTrue(meta!.logMessages!.some((line) => line.includes('Memo (len 8)')))
  })

  test('base64: wire bytes, balances, fee and loaded addresses', async ({ assert }) => {
    const payer = await chain.wallet(1)
    const tx = await chain.transferSol({ from: payer, to: treasury, lamports: 123_456n })
    const result = await rpc
      .getTransaction(toSignature(tx.signature), {
        encoding: 'base64',
        maxSupportedTransactionVersion: 0,
      })
      .send()
    const decoded = decodeTransactionFromRpcResponse(result!)
    assert.equal(getSignatureFromTransaction(decoded.transaction), tx.signature)
    assert.deepEqual(decoded.loadedAddresses, { readonly: [], writable: [] })
    const meta = result!.meta!
    assert.equal(meta.fee, 5000n)
    const index = decoded.compiledMessage.staticAccounts.indexOf(treasury)
    assert.equal(meta.postBalances[index] - meta.preBalances[index], 123_456n)
    assert.equal(meta.preBalances[0] - meta.postBalances[0], 123_456n + 5000n)
    assert.equal(result!.blockTime, BigInt(tx.blockTime!))
    assert.equal(result!.slot, BigInt(tx.slot))
  })

  test('versions: legacy answered with or without maxSupportedTransactionVersion, v0 only with it', async ({
    assert,
  }) => {
    const payer = await chain.wallet(1)
    const legacy = await chain.transferSol({
      from: payer,
      to: treasury,
      lamports: 1000n,
      version: 'legacy',
    })
    const v0 = await chain.transferSol({ from: payer, to: treasury, lamports: 1000n })

    const withVersion = await rpc
      .getTransaction(toSignature(legacy.signature), {
        encoding: 'base64',
        maxSupportedTransactionVersion: 0,
      })
      .send()
    assert.equal(withVersion!.version, 'legacy')
    const plain = await rpc
      .getTransaction(toSignature(legacy.signature), { encoding: 'base64' })
      .send()
    assert.notProperty(plain!, 'version')

    try {
      await rpc.getTransaction(toSignature(v0.signature), { encoding: 'base64' }).send()
      assert.fail('expected the node to refuse a v0 transaction')
    } catch (error) {
      assert.isTrue(isSolanaError(error), String(error))
      assert.include(String((error as Error).message), 'maxSupportedTransactionVersion')
    }
  })

  test('a failed transaction: error, charged fee, no transfer', async ({ assert }) => {
    const payer = await chain.wallet(1)
    const before = chain.balance(treasury)
    const tx = await chain.transferSol({ from: payer, to: treasury, lamports: 5000n, fail: true })
    assert.equal(chain.balance(treasury), before)

    const result = await rpc
      .getTransaction(toSignature(tx.signature), {
        encoding: 'jsonParsed',
        maxSupportedTransactionVersion: 0,
      })
      .send()
    assert.deepEqual(result!.meta!.err as unknown, { InstructionError: [1n, { Custom: 1n }] })
    assert.deepEqual(result!.meta!.status as unknown, {
      Err: { InstructionError: [1n, { Custom: 1n }] },
    })
    assert.equal(result!.meta!.fee, 5000n)
    assert.equal(result!.meta!.preBalances[0] - result!.meta!.postBalances[0], 5000n)

    // The knob reports any error on a recorded transaction.
    const ok = await chain.transferSol({ from: payer, to: treasury, lamports: 5000n })
    chain.setError(ok.signature, 'AccountInUse')
    const statuses = await rpc.getSignatureStatuses([toSignature(ok.signature)]).send()
    assert.equal(statuses.value[0]!.err as unknown, 'AccountInUse')
  })

  test('commitment: confirmed transactions are hidden from finalized reads', async ({ assert }) => {
    const payer = await chain.wallet(1)
    const tx = await chain.transferSol({ from: payer, to: treasury, lamports: 7000n })
    chain.setCommitment(tx.signature, 'confirmed')
    const signature = toSignature(tx.signature)

    const finalized = await rpc
      .getTransaction(signature, {
        commitment: 'finalized',
        encoding: 'base64',
        maxSupportedTransactionVersion: 0,
      })
      .send()
    assert.isNull(finalized)
    const confirmed = await rpc
      .getTransaction(signature, {
        commitment: 'confirmed',
        encoding: 'base64',
        maxSupportedTransactionVersion: 0,
      })
      .send()
    assert.isNotNull(confirmed)

    const unknown = toSignature(getBase58Decoder().decode(randomBytes(64)))
    const statuses = await rpc.getSignatureStatuses([signature, unknown]).send()
    assert.equal(statuses.value[0]!.confirmationStatus, 'confirmed')
    assert.isNotNull(statuses.value[0]!.confirmations)
    assert.isNull(statuses.value[1])

    chain.setCommitment(tx.signature, 'finalized')
    const again = await rpc.getSignatureStatuses([signature]).send()
    assert.equal(again.value[0]!.confirmationStatus, 'finalized')
    assert.isNull(again.value[0]!.confirmations)
  })

  test('getAccountInfo: a mint in base64 and jsonParsed, a token account, a missing account', async ({
    assert,
  }) => {
    const raw = await rpc.getAccountInfo(usdc.address, { encoding: 'base64' }).send()
    assert.equal(raw.value!.owner, TOKEN_PROGRAM_ADDRESS)
    const mint = getMintDecoder().decode(Buffer.from(raw.value!.data[0], 'base64'))
    assert.equal(mint.decimals, 6)

    const parsed = await rpc.getAccountInfo(usdc.address, { encoding: 'jsonParsed' }).send()
    const data = parsed.value!.data as any
    assert.equal(data.program, 'spl-token')
    assert.equal(data.parsed.type, 'mint')
    assert.equal(data.parsed.info.decimals, 6)
    assert.equal(data.parsed.info.mintAuthority, usdc.authority.address)

    const holder = await chain.wallet(1)
    await chain.mintTo(usdc, holder.address, 3_000_000n)
    const ata = await chain.associatedTokenAddress(holder.address, usdc)
    const account = await rpc.getAccountInfo(ata, { encoding: 'jsonParsed' }).send()
    const info = (account.value!.data as any).parsed.info
    assert.equal(info.owner, holder.address)
    assert.equal(info.tokenAmount.uiAmountString, '3')

    const nobody = await generateKeyPairSigner()
    const none = await rpc.getAccountInfo(nobody.address, { encoding: 'base64' }).send()
    assert.isNull(none.value)
  })

  test('getLatestBlockhash and sendTransaction: a client-built transaction lands on the chain', async ({
    assert,
  }) => {
    const payer = await chain.wallet(1)
    const { value } = await rpc.getLatestBlockhash().send()
    const transaction = await pipe(
      createTransactionMessage({ version: 0 }),
      (message) => setTransactionMessageFeePayerSigner(payer, message),
      (message) => setTransactionMessageLifetimeUsingBlockhash(value, message),
      (message) =>
        appendTransactionMessageInstructions(
          [
            getTransferSolInstruction({
              source: payer,
              destination: treasury,
              amount: lamports(4242n),
            }),
          ],
          message
        ),
      (message) => signTransactionMessageWithSigners(message)
    )
    const before = chain.balance(treasury)
    const sent = await rpc
      .sendTransaction(getBase64EncodedWireTransaction(transaction), { encoding: 'base64' })
      .send()
    assert.equal(sent, getSignatureFromTransaction(transaction))
    assert.equal(chain.balance(treasury) - before, 4242n)
    assert.isDefined(chain.find(sent))
  })

  test('unknown methods answer the JSON-RPC "method not found" error', async ({ assert }) => {
    const response = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'getBlockProduction', params: [] }),
    })
    const body = (await response.json()) as any
    assert.equal(body.error.code, -32601)
    assert.equal(body.id, 1)
  })
})
