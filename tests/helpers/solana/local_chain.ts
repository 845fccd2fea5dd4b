import { createHash } from 'node:crypto'
import { FailedTransactionMetadata, LiteSVM, type TransactionMetadata } from 'litesvm'
import {
  AccountRole,
  appendTransactionMessageInstructions,
  createTransactionMessage,
  generateKeyPairSigner,
  getAddressDecoder,
  getAddressEncoder,
  getCompiledTransactionMessageDecoder,
  getSignatureFromTransaction,
  getTransactionDecoder,
  getTransactionEncoder,
  lamports,
  pipe,
  setTransactionMessageFeePayerSigner,
  signTransactionMessageWithSigners,
  type AccountSignerMeta,
  type Address,
  type CompiledTransactionMessageWithLifetime,
  type Instruction,
  type KeyPairSigner,
  type LegacyCompiledTransactionMessage,
  type V0CompiledTransactionMessage,
  type Transaction,
  type TransactionSigner,
} from '@solana/kit'
import { getCreateAccountInstruction, getTransferSolInstruction } from '@solana-program/system'
import {
  findAssociatedTokenPda,
  getCreateAssociatedTokenIdempotentInstructionAsync,
  getInitializeMint2Instruction,
  getMintToInstruction,
  getTransferCheckedInstruction,
  TOKEN_PROGRAM_ADDRESS,
} from '@solana-program/token'
import { getAddMemoInstruction, LEGACY_MEMO_PROGRAM_ADDRESS_V3 } from '@solana-program/memo'
import {
  rpcTransactionError,
  type RpcTransactionError,
} from '#tests/helpers/solana/transaction_errors'

export const TOKEN_2022_PROGRAM_ADDRESS =
  'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb' as Address<'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb'>
const TOKEN_PROGRAMS: string[] = [TOKEN_PROGRAM_ADDRESS, TOKEN_2022_PROGRAM_ADDRESS]

export type Commitment = 'processed' | 'confirmed' | 'finalized'

/** A decoded legacy or v0 message (the versions a node serves with maxSupportedTransactionVersion 0). */
export type ChainMessage = (LegacyCompiledTransactionMessage | V0CompiledTransactionMessage) &
  CompiledTransactionMessageWithLifetime

/** A token account's state as the runtime holds it (read from its data). */
export interface TokenAccountState {
  mint: Address
  owner: Address
  amount: bigint
  decimals: number
  programId: Address
}

/** One executed transaction with what a node records about it. */
export interface ChainTransaction {
  signature: string
  wire: Uint8Array
  message: ChainMessage
  version: 'legacy' | 0
  slot: number
  blockTime: number | null
  commitment: Commitment
  err: RpcTransactionError | null
  fee: bigint
  accountKeys: Address[]
  preBalances: bigint[]
  postBalances: bigint[]
  preTokenBalances: Map<number, TokenAccountState>
  postTokenBalances: Map<number, TokenAccountState>
  logs: string[]
  computeUnitsConsumed: bigint
  /** Inner instructions per top-level instruction index (as the runtime reported them). */
  innerInstructions: {
    index: number
    instructions: {
      programIdIndex: number
      accounts: number[]
      data: Uint8Array
      stackHeight: number
    }[]
  }[]
  returnData: { programId: Address; data: Uint8Array } | null
  /** Hidden from every RPC answer, as if the node never saw it. */
  forgotten: boolean
}

export interface SendOptions {
  feePayer: TransactionSigner
  version?: 'legacy' | 0
  memo?: string
  /** Append an instruction that really fails (a transfer of more lamports than exist). */
  fail?: boolean
}

export interface Mint {
  address: Address
  decimals: number
  programId: Address
  authority: KeyPairSigner
}

const addressDecoder = getAddressDecoder()
const addressEncoder = getAddressEncoder()

/**
 * Token-2022 TransferFeeExtension::InitializeTransferFeeConfig (instruction 26,
 * sub-instruction 0), encoded by hand: @solana-program/token covers the
 * classic program only.
 */
function initializeTransferFeeConfig(
  mint: Address,
  authority: Address,
  fee: { basisPoints: number; maxFee: bigint }
): Instruction {
  const data = new Uint8Array(2 + 33 + 33 + 2 + 8)
  const view = new DataView(data.buffer)
  data.set([26, 0, 1], 0)
  data.set(addressEncoder.encode(authority), 3)
  data[35] = 1
  data.set(addressEncoder.encode(authority), 36)
  view.setUint16(68, fee.basisPoints, true)
  view.setBigUint64(70, fee.maxFee, true)
  return {
    programAddress: TOKEN_2022_PROGRAM_ADDRESS,
    accounts: [{ address: mint, role: AccountRole.WRITABLE }],
    data,
  }
}

/** Reads an SPL token account (classic or Token-2022) from raw account data. */
function decodeTokenAccount(
  data: Uint8Array
): Omit<TokenAccountState, 'decimals' | 'programId'> | null {
  const isAccount = data.length === 165 || (data.length > 165 && data[165] === 2)
  if (!isAccount || data[108] === 0) return null
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
  return {
    mint: addressDecoder.decode(data.subarray(0, 32)),
    owner: addressDecoder.decode(data.subarray(32, 64)),
    amount: view.getBigUint64(64, true),
  }
}

/**
 * A local Solana ledger for tests: transactions are really signed with
 * @solana/kit and executed by LiteSVM (the real runtime and programs), and
 * each execution is recorded with the balances, token balances, logs and
 * error a node would report, for the local RPC server to answer from.
 */
export class LocalChain {
  readonly svm = new LiteSVM()
  readonly transactions = new Map<string, ChainTransaction>()
  slot = 320_000_000

  /** A new keypair holding `sol` SOL. */
  async wallet(sol = 10): Promise<KeyPairSigner> {
    const signer = await generateKeyPairSigner()
    this.svm.airdrop(signer.address, lamports(BigInt(Math.round(sol * 1e9))))
    return signer
  }

  /** Lamports held by an address (0 when the account does not exist). */
  balance(address: Address): bigint {
    return this.svm.getBalance(address) ?? 0n
  }

  /** The token account state at an address, if it is one. */
  tokenAccount(address: Address): TokenAccountState | null {
    const account = this.svm.getAccount(address)
    if (!account.exists || !TOKEN_PROGRAMS.includes(account.programAddress)) return null
    const decoded = decodeTokenAccount(account.data)
    if (!decoded) return null
    return {
      ...decoded,
      decimals: this.mintDecimals(decoded.mint),
      programId: account.programAddress,
    }
  }

  mintDecimals(mint: Address): number {
    const account = this.svm.getAccount(mint)
    return account.exists ? account.data[44] : 0
  }

  /**
   * Creates a mint by a real transaction (createAccount + initializeMint2).
   * With `transferFee`, a Token-2022 mint whose transfers withhold
   * `basisPoints` (at most `maxFee` base units) in the recipient's account.
   */
  async createMint(
    decimals: number,
    programId: Address = TOKEN_PROGRAM_ADDRESS,
    options: { transferFee?: { basisPoints: number; maxFee: bigint } } = {}
  ): Promise<Mint> {
    const authority = await this.wallet(5)
    const mint = await generateKeyPairSigner()
    const instructions: Instruction[] = []
    let space = 82n
    if (options.transferFee) {
      if (programId !== TOKEN_2022_PROGRAM_ADDRESS) throw new Error('transfer fees need Token-2022')
      // Base mint padded to 165 bytes, account type, TLV header, TransferFeeConfig (108 bytes).
      space = 165n + 1n + 4n + 108n
      instructions.push(
        initializeTransferFeeConfig(mint.address, authority.address, options.transferFee)
      )
    }
    instructions.unshift(
      getCreateAccountInstruction({
        payer: authority,
        newAccount: mint,
        lamports: lamports(this.svm.minimumBalanceForRentExemption(space)),
        space,
        programAddress: programId,
      })
    )
    instructions.push(
      getInitializeMint2Instruction(
        { mint: mint.address, decimals, mintAuthority: authority.address },
        { programAddress: programId }
      )
    )
    await this.send(instructions, { feePayer: authority })
    return { address: mint.address, decimals, programId, authority }
  }

  /**
   * A Token-2022 mint carrying its own metadata, made by real transactions
   * the way wallets do it: createAccount (rent for the final size),
   * MetadataPointer::Initialize pointing at the mint itself,
   * InitializeMint2, then the token-metadata interface's Initialize (name,
   * symbol, uri), which Token-2022 stores as the mint's TokenMetadata
   * extension. The extension instructions are encoded by hand:
   * @solana-program/token covers the classic program only.
   */
  async createToken2022MintWithMetadata(
    decimals: number,
    names: { name: string; symbol: string; uri: string }
  ): Promise<Mint> {
    const authority = await this.wallet(5)
    const mint = await generateKeyPairSigner()
    const borsh = (text: string) => {
      const bytes = new TextEncoder().encode(text)
      const out = new Uint8Array(4 + bytes.length)
      new DataView(out.buffer).setUint32(0, bytes.length, true)
      out.set(bytes, 4)
      return out
    }
    // Base 165 + account type + MetadataPointer TLV (4 + 64).
    const space = 165n + 1n + 4n + 64n
    const metadataValue =
      32 +
      32 +
      [names.name, names.symbol, names.uri].reduce(
        (size, text) => size + 4 + new TextEncoder().encode(text).length,
        0
      ) +
      4 // no additional metadata
    const finalSize = space + 4n + BigInt(metadataValue)

    const pointerData = new Uint8Array(2 + 32 + 32)
    pointerData.set([39, 0], 0)
    pointerData.set(addressEncoder.encode(authority.address), 2)
    pointerData.set(addressEncoder.encode(mint.address), 34)
    const initializePointer: Instruction = {
      programAddress: TOKEN_2022_PROGRAM_ADDRESS,
      accounts: [{ address: mint.address, role: AccountRole.WRITABLE }],
      data: pointerData,
    }
    const mintAuthority: AccountSignerMeta = {
      address: authority.address,
      role: AccountRole.READONLY_SIGNER,
      signer: authority,
    }
    // sha256("spl_token_metadata_interface:initialize_account")[0..8]
    const discriminator = new Uint8Array(
      createHash('sha256').update('spl_token_metadata_interface:initialize_account').digest()
    ).subarray(0, 8)
    const initializeMetadata: Instruction = {
      programAddress: TOKEN_2022_PROGRAM_ADDRESS,
      accounts: [
        { address: mint.address, role: AccountRole.WRITABLE },
        { address: authority.address, role: AccountRole.READONLY },
        { address: mint.address, role: AccountRole.READONLY },
        mintAuthority,
      ],
      data: new Uint8Array([
        ...discriminator,
        ...borsh(names.name),
        ...borsh(names.symbol),
        ...borsh(names.uri),
      ]),
    }
    await this.send(
      [
        getCreateAccountInstruction({
          payer: authority,
          newAccount: mint,
          lamports: lamports(this.svm.minimumBalanceForRentExemption(finalSize)),
          space,
          programAddress: TOKEN_2022_PROGRAM_ADDRESS,
        }),
        initializePointer,
        getInitializeMint2Instruction(
          { mint: mint.address, decimals, mintAuthority: authority.address },
          { programAddress: TOKEN_2022_PROGRAM_ADDRESS }
        ),
        initializeMetadata,
      ],
      { feePayer: authority }
    )
    return { address: mint.address, decimals, programId: TOKEN_2022_PROGRAM_ADDRESS, authority }
  }

  async associatedTokenAddress(owner: Address, mint: Mint): Promise<Address> {
    const [ata] = await findAssociatedTokenPda({
      owner,
      mint: mint.address,
      tokenProgram: mint.programId,
    })
    return ata
  }

  /** Mints `amount` base units to the owner's associated token account (created when missing). */
  async mintTo(mint: Mint, owner: Address, amount: bigint): Promise<ChainTransaction> {
    const ata = await this.associatedTokenAddress(owner, mint)
    return this.send(
      [
        await getCreateAssociatedTokenIdempotentInstructionAsync({
          payer: mint.authority,
          owner,
          mint: mint.address,
          tokenProgram: mint.programId,
        }),
        getMintToInstruction(
          { mint: mint.address, token: ata, mintAuthority: mint.authority, amount },
          { programAddress: mint.programId }
        ),
      ],
      { feePayer: mint.authority }
    )
  }

  /** A signed SOL transfer (system program), optionally with a memo. */
  async transferSol(input: {
    from: TransactionSigner
    to: Address
    lamports: bigint
    feePayer?: TransactionSigner
    memo?: string
    version?: 'legacy' | 0
    fail?: boolean
  }): Promise<ChainTransaction> {
    return this.send(
      [
        getTransferSolInstruction({
          source: input.from,
          destination: input.to,
          amount: lamports(input.lamports),
        }),
      ],
      {
        feePayer: input.feePayer ?? input.from,
        memo: input.memo,
        version: input.version,
        fail: input.fail,
      }
    )
  }

  /**
   * A signed token transfer (transferChecked) from the sender's associated
   * token account to the recipient owner's, creating the recipient's account
   * in the same transaction unless `createRecipientAccount` is false.
   */
  async transferToken(input: {
    mint: Mint
    from: TransactionSigner
    toOwner: Address
    amount: bigint
    feePayer?: TransactionSigner
    createRecipientAccount?: boolean
    memo?: string
    version?: 'legacy' | 0
    fail?: boolean
    /** Decimals written into transferChecked (defaults to the mint's). */
    decimals?: number
  }): Promise<ChainTransaction> {
    const feePayer = input.feePayer ?? input.from
    const instructions: Instruction[] = []
    if (input.createRecipientAccount !== false) {
      instructions.push(
        await getCreateAssociatedTokenIdempotentInstructionAsync({
          payer: feePayer,
          owner: input.toOwner,
          mint: input.mint.address,
          tokenProgram: input.mint.programId,
        })
      )
    }
    instructions.push(
      getTransferCheckedInstruction(
        {
          source: await this.associatedTokenAddress(input.from.address, input.mint),
          mint: input.mint.address,
          destination: await this.associatedTokenAddress(input.toOwner, input.mint),
          authority: input.from,
          amount: input.amount,
          decimals: input.decimals ?? input.mint.decimals,
        },
        { programAddress: input.mint.programId }
      )
    )
    return this.send(instructions, {
      feePayer,
      memo: input.memo,
      version: input.version,
      fail: input.fail,
    })
  }

  /** Signs a transaction of these instructions with every signer they name. */
  async sign(instructions: Instruction[], options: SendOptions): Promise<Transaction> {
    const all = [...instructions]
    if (options.memo !== undefined) {
      all.push(
        getAddMemoInstruction(
          { memo: options.memo },
          { programAddress: LEGACY_MEMO_PROGRAM_ADDRESS_V3 }
        )
      )
    }
    if (options.fail) {
      const nobody = await generateKeyPairSigner()
      all.push(
        getTransferSolInstruction({
          source: options.feePayer,
          destination: nobody.address,
          amount: lamports(10n ** 18n),
        })
      )
    }
    if (options.version === 'legacy') {
      return pipe(
        createTransactionMessage({ version: 'legacy' }),
        (message) => setTransactionMessageFeePayerSigner(options.feePayer, message),
        (message) => this.svm.setTransactionMessageLifetimeUsingLatestBlockhash(message),
        (message) => appendTransactionMessageInstructions(all, message),
        (message) => signTransactionMessageWithSigners(message)
      )
    }
    return pipe(
      createTransactionMessage({ version: 0 }),
      (message) => setTransactionMessageFeePayerSigner(options.feePayer, message),
      (message) => this.svm.setTransactionMessageLifetimeUsingLatestBlockhash(message),
      (message) => appendTransactionMessageInstructions(all, message),
      (message) => signTransactionMessageWithSigners(message)
    )
  }

  /** Signs and executes instructions; the recorded transaction is finalized and timed now. */
  async send(instructions: Instruction[], options: SendOptions): Promise<ChainTransaction> {
    return this.execute(await this.sign(instructions, options))
  }

  /**
   * Executes a signed transaction (wire bytes or kit Transaction) and records
   * it. Transactions a validator would drop (bad signature, unpayable fee)
   * throw instead of being recorded.
   */
  execute(input: Transaction | Uint8Array): ChainTransaction {
    const transaction = input instanceof Uint8Array ? getTransactionDecoder().decode(input) : input
    const wire = new Uint8Array(getTransactionEncoder().encode(transaction))
    const decoded = getCompiledTransactionMessageDecoder().decode(transaction.messageBytes)
    if (decoded.version !== 0 && decoded.version !== 'legacy') {
      throw new Error(`transaction version ${decoded.version} is not served by this harness`)
    }
    const message = decoded as ChainMessage
    const accountKeys = [...message.staticAccounts]
    const snapshot = () => {
      const balances = accountKeys.map((key) => this.balance(key))
      const tokens = new Map<number, TokenAccountState>()
      accountKeys.forEach((key, index) => {
        const state = this.tokenAccount(key)
        if (state) tokens.set(index, state)
      })
      return { balances, tokens }
    }

    const before = snapshot()
    const result = this.svm.sendTransaction(transaction)
    let metadata: TransactionMetadata
    let err: RpcTransactionError | null = null
    if (result instanceof FailedTransactionMetadata) {
      err = rpcTransactionError(result.err())
      if (typeof err === 'string') {
        // Not executed at all (signature, fee, blockhash...): a node would not record it.
        throw new Error(`transaction rejected before execution: ${err}`)
      }
      metadata = result.meta()
    } else {
      metadata = result
    }
    const after = snapshot()
    this.svm.expireBlockhash()
    this.slot += 1

    const inner = metadata.innerInstructions()
    const returnData = metadata.returnData()
    const record: ChainTransaction = {
      signature: getSignatureFromTransaction(transaction),
      wire,
      message,
      version: message.version === 0 ? 0 : 'legacy',
      slot: this.slot,
      blockTime: Math.floor(Date.now() / 1000),
      commitment: 'finalized',
      err,
      fee: before.balances.reduce((a, b) => a + b, 0n) - after.balances.reduce((a, b) => a + b, 0n),
      accountKeys,
      preBalances: before.balances,
      postBalances: after.balances,
      preTokenBalances: before.tokens,
      postTokenBalances: after.tokens,
      logs: metadata.logs(),
      computeUnitsConsumed: metadata.computeUnitsConsumed(),
      innerInstructions: inner
        .map((list, index) => ({
          index,
          instructions: list.map((item) => {
            const compiled = item.instruction()
            return {
              programIdIndex: compiled.programIdIndex(),
              accounts: Array.from(compiled.accounts()),
              data: compiled.data(),
              stackHeight: item.stackHeight(),
            }
          }),
        }))
        .filter((entry) => entry.instructions.length > 0),
      returnData:
        returnData.data().length > 0
          ? { programId: addressDecoder.decode(returnData.programId()), data: returnData.data() }
          : null,
      forgotten: false,
    }
    this.transactions.set(record.signature, record)
    return record
  }

  private record(signature: string): ChainTransaction {
    const record = this.transactions.get(signature)
    if (!record) throw new Error(`unknown transaction ${signature}`)
    return record
  }

  // Knobs for tests.

  /** Marks a transaction as only processed or confirmed (or finalized again). */
  setCommitment(signature: string, commitment: Commitment): void {
    this.record(signature).commitment = commitment
  }

  /** Sets the block time a node reports for a transaction (unix seconds, or null). */
  setBlockTime(signature: string, blockTime: number | null): void {
    this.record(signature).blockTime = blockTime
  }

  /** Reports a transaction as failed with this error (balances as recorded). */
  setError(signature: string, err: RpcTransactionError | null): void {
    this.record(signature).err = err
  }

  /** Hides a transaction from every answer, as an unknown signature. */
  forget(signature: string): void {
    this.record(signature).forgotten = true
  }

  /** A recorded, visible transaction. */
  find(signature: string): ChainTransaction | undefined {
    const record = this.transactions.get(signature)
    return record && !record.forgotten ? record : undefined
  }

  /**
   * Writes a Metaplex Token Metadata account (MetadataV1 layout: key 4,
   * update authority, mint, then name/symbol/uri as Borsh strings padded
   * with NULs to 32/10/200 bytes as the program stores them) at the mint's
   * metadata PDA. The Metaplex program itself is not loaded in LiteSVM, so
   * the account is placed directly.
   */
  setMetaplexMetadata(
    metadataAddress: Address,
    mint: Mint,
    names: { name: string; symbol: string; uri?: string },
    metadataProgram: Address
  ): void {
    const padded = (text: string, size: number) => {
      const bytes = new Uint8Array(4 + size)
      const encoded = new TextEncoder().encode(text)
      new DataView(bytes.buffer).setUint32(0, size, true)
      bytes.set(encoded.subarray(0, size), 4)
      return bytes
    }
    const parts = [
      Uint8Array.of(4),
      addressEncoder.encode(mint.authority.address),
      addressEncoder.encode(mint.address),
      padded(names.name, 32),
      padded(names.symbol, 10),
      padded(names.uri ?? '', 200),
      new Uint8Array(2 + 1 + 1 + 1 + 1), // fee bps, no creators, primary sale, mutable, no edition nonce
    ]
    const data = new Uint8Array(parts.reduce((size, part) => size + part.length, 0))
    let offset = 0
    for (const part of parts) {
      data.set(part, offset)
      offset += part.length
    }
    this.svm.setAccount({
      address: metadataAddress,
      data,
      executable: false,
      lamports: lamports(this.svm.minimumBalanceForRentExemption(BigInt(data.length))),
      programAddress: metadataProgram,
      space: BigInt(data.length),
    })
  }

  latestBlockhash(): string {
    return this.svm.latestBlockhash()
  }
}
