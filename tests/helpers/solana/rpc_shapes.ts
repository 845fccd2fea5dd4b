import { getBase58Decoder, getBase58Encoder, getUtf8Decoder, type Address } from '@solana/kit'
import { ASSOCIATED_TOKEN_PROGRAM_ADDRESS, TOKEN_PROGRAM_ADDRESS } from '@solana-program/token'
import { SYSTEM_PROGRAM_ADDRESS } from '@solana-program/system'
import { SUPPORTED_MEMO_PROGRAM_ADDRESSES } from '@solana-program/memo'
import {
  TOKEN_2022_PROGRAM_ADDRESS,
  type ChainTransaction,
  type LocalChain,
  type TokenAccountState,
} from '#tests/helpers/solana/local_chain'

/**
 * Builds JSON-RPC results in the shapes a Solana node (Agave) returns, from
 * transactions LocalChain really executed.
 */

const base58 = getBase58Decoder()
const base58Bytes = getBase58Encoder()
const utf8 = getUtf8Decoder()

/** Accounts a node never reports as writable (programs and sysvars). */
const reservedKeys = new Set<string>([
  SYSTEM_PROGRAM_ADDRESS,
  TOKEN_PROGRAM_ADDRESS,
  TOKEN_2022_PROGRAM_ADDRESS,
  ASSOCIATED_TOKEN_PROGRAM_ADDRESS,
  ...SUPPORTED_MEMO_PROGRAM_ADDRESSES,
  'SysvarRent111111111111111111111111111111111',
  'SysvarC1ock11111111111111111111111111111111',
  'ComputeBudget111111111111111111111111111111',
])

function formatUnits(amount: bigint, decimals: number): string {
  const digits = amount.toString().padStart(decimals + 1, '0')
  const whole = digits.slice(0, digits.length - decimals)
  const fraction = digits.slice(digits.length - decimals).replace(/0+$/, '')
  return fraction ? `${whole}.${fraction}` : whole
}

/** `uiTokenAmount` / `tokenAmount` as a node prints it. */
export function uiTokenAmount(amount: bigint, decimals: number) {
  const uiAmountString = formatUnits(amount, decimals)
  return { amount: amount.toString(), decimals, uiAmount: Number(uiAmountString), uiAmountString }
}

function tokenBalances(balances: Map<number, TokenAccountState>) {
  return [...balances.entries()].map(([accountIndex, state]) => ({
    accountIndex,
    mint: state.mint,
    owner: state.owner,
    programId: state.programId,
    uiTokenAmount: uiTokenAmount(state.amount, state.decimals),
  }))
}

function isWritable(record: ChainTransaction, index: number): boolean {
  const { header, staticAccounts, instructions } = record.message
  const key = staticAccounts[index]
  const invoked = instructions.some((ix) => ix.programAddressIndex === index)
  if (invoked || reservedKeys.has(key)) return false
  if (index < header.numSignerAccounts) {
    return index < header.numSignerAccounts - header.numReadonlySignerAccounts
  }
  return index < staticAccounts.length - header.numReadonlyNonSignerAccounts
}

const u64 = (data: Uint8Array, offset: number) =>
  new DataView(data.buffer, data.byteOffset, data.byteLength).getBigUint64(offset, true)
const u32 = (data: Uint8Array, offset: number) =>
  new DataView(data.buffer, data.byteOffset, data.byteLength).getUint32(offset, true)
const addressAt = (data: Uint8Array, offset: number) =>
  base58.decode(data.subarray(offset, offset + 32)) as Address

function parseSystem(data: Uint8Array, accounts: Address[]) {
  switch (data.length >= 4 ? u32(data, 0) : -1) {
    case 0:
      return {
        type: 'createAccount',
        info: {
          source: accounts[0],
          newAccount: accounts[1],
          lamports: Number(u64(data, 4)),
          space: Number(u64(data, 12)),
          owner: addressAt(data, 20),
        },
      }
    case 1:
      return { type: 'assign', info: { account: accounts[0], owner: addressAt(data, 4) } }
    case 2:
      return {
        type: 'transfer',
        info: { source: accounts[0], destination: accounts[1], lamports: Number(u64(data, 4)) },
      }
    case 8:
      return { type: 'allocate', info: { account: accounts[0], space: Number(u64(data, 4)) } }
    default:
      return null
  }
}

function parseToken(data: Uint8Array, accounts: Address[]) {
  switch (data[0]) {
    case 3:
      return {
        type: 'transfer',
        info: {
          source: accounts[0],
          destination: accounts[1],
          authority: accounts[2],
          amount: u64(data, 1).toString(),
        },
      }
    case 7:
      return {
        type: 'mintTo',
        info: {
          mint: accounts[0],
          account: accounts[1],
          mintAuthority: accounts[2],
          amount: u64(data, 1).toString(),
        },
      }
    case 12:
      return {
        type: 'transferChecked',
        info: {
          source: accounts[0],
          mint: accounts[1],
          destination: accounts[2],
          authority: accounts[3],
          tokenAmount: uiTokenAmount(u64(data, 1), data[9]),
        },
      }
    case 18:
      return {
        type: 'initializeAccount3',
        info: { account: accounts[0], mint: accounts[1], owner: addressAt(data, 1) },
      }
    case 20:
      return {
        type: 'initializeMint2',
        info: {
          mint: accounts[0],
          decimals: data[1],
          mintAuthority: addressAt(data, 2),
          ...(data[34] === 1 ? { freezeAuthority: addressAt(data, 35) } : {}),
        },
      }
    case 21:
      return { type: 'getAccountDataSize', info: { mint: accounts[0], extensionTypes: [] } }
    case 22:
      return { type: 'initializeImmutableOwner', info: { account: accounts[0] } }
    default:
      return null
  }
}

function parseAssociatedToken(data: Uint8Array, accounts: Address[]) {
  const kind = data.length === 0 ? 0 : data[0]
  if (kind > 1) return null
  return {
    type: kind === 0 ? 'create' : 'createIdempotent',
    info: {
      source: accounts[0],
      account: accounts[1],
      wallet: accounts[2],
      mint: accounts[3],
      systemProgram: accounts[4],
      tokenProgram: accounts[5],
    },
  }
}

/** An instruction in jsonParsed form: parsed when a node has a parser, raw otherwise. */
function parsedInstruction(
  programId: Address,
  accounts: Address[],
  data: Uint8Array,
  stackHeight: number | null
) {
  if ((SUPPORTED_MEMO_PROGRAM_ADDRESSES as readonly string[]).includes(programId)) {
    return { parsed: utf8.decode(data), program: 'spl-memo', programId, stackHeight }
  }
  let parsed: { type: string; info: unknown } | null = null
  let program = ''
  if (programId === SYSTEM_PROGRAM_ADDRESS) {
    parsed = parseSystem(data, accounts)
    program = 'system'
  } else if (programId === TOKEN_PROGRAM_ADDRESS || programId === TOKEN_2022_PROGRAM_ADDRESS) {
    parsed = parseToken(data, accounts)
    program = programId === TOKEN_PROGRAM_ADDRESS ? 'spl-token' : 'spl-token-2022'
  } else if (programId === ASSOCIATED_TOKEN_PROGRAM_ADDRESS) {
    parsed = parseAssociatedToken(data, accounts)
    program = 'spl-associated-token-account'
  }
  if (parsed) return { parsed, program, programId, stackHeight }
  return { accounts, data: base58.decode(data), programId, stackHeight }
}

function meta(record: ChainTransaction, parsed: boolean, withLoaded: boolean) {
  const keys = record.accountKeys
  return {
    computeUnitsConsumed: Number(record.computeUnitsConsumed),
    err: record.err,
    fee: Number(record.fee),
    innerInstructions: record.innerInstructions.map((entry) => ({
      index: entry.index,
      instructions: entry.instructions.map((ix) =>
        parsed
          ? parsedInstruction(
              keys[ix.programIdIndex],
              ix.accounts.map((i) => keys[i]),
              ix.data,
              ix.stackHeight
            )
          : {
              accounts: ix.accounts,
              data: base58.decode(ix.data),
              programIdIndex: ix.programIdIndex,
              stackHeight: ix.stackHeight,
            }
      ),
    })),
    ...(withLoaded && !parsed ? { loadedAddresses: { readonly: [], writable: [] } } : {}),
    logMessages: record.logs,
    postBalances: record.postBalances.map(Number),
    postTokenBalances: tokenBalances(record.postTokenBalances),
    preBalances: record.preBalances.map(Number),
    preTokenBalances: tokenBalances(record.preTokenBalances),
    ...(record.returnData
      ? {
          returnData: {
            programId: record.returnData.programId,
            data: [Buffer.from(record.returnData.data).toString('base64'), 'base64'],
          },
        }
      : {}),
    rewards: [],
    status: record.err === null ? { Ok: null } : { Err: record.err },
  }
}

function transactionJsonParsed(record: ChainTransaction) {
  const { message } = record
  const keys = record.accountKeys
  const signatures = record.wire.subarray(1, 1 + 64 * record.wire[0])
  return {
    message: {
      accountKeys: keys.map((pubkey, index) => ({
        pubkey,
        signer: index < message.header.numSignerAccounts,
        source: 'transaction',
        writable: isWritable(record, index),
      })),
      ...(record.version === 0 ? { addressTableLookups: [] } : {}),
      instructions: message.instructions.map((ix) =>
        parsedInstruction(
          keys[ix.programAddressIndex],
          (ix.accountIndices ?? []).map((i) => keys[i]),
          new Uint8Array(ix.data ?? []),
          null
        )
      ),
      recentBlockhash: message.lifetimeToken,
    },
    signatures: Array.from({ length: record.wire[0] }, (_, i) =>
      base58.decode(signatures.subarray(i * 64, i * 64 + 64))
    ),
  }
}

export type TransactionEncoding = 'base64' | 'base58' | 'jsonParsed'

/** The `getTransaction` result for a recorded transaction. */
export function transactionResult(
  record: ChainTransaction,
  encoding: TransactionEncoding,
  maxSupportedTransactionVersion: number | undefined
) {
  const withVersion = maxSupportedTransactionVersion !== undefined
  const parsed = encoding === 'jsonParsed'
  return {
    blockTime: record.blockTime,
    meta: meta(record, parsed, withVersion),
    slot: record.slot,
    transaction: parsed
      ? transactionJsonParsed(record)
      : encoding === 'base58'
        ? [base58.decode(record.wire), 'base58']
        : [Buffer.from(record.wire).toString('base64'), 'base64'],
    ...(withVersion ? { version: record.version } : {}),
  }
}

/** One entry of `getSignatureStatuses`. */
export function signatureStatus(chain: LocalChain, record: ChainTransaction) {
  return {
    confirmationStatus: record.commitment,
    confirmations: record.commitment === 'finalized' ? null : Math.max(0, chain.slot - record.slot),
    err: record.err,
    slot: record.slot,
    status: record.err === null ? { Ok: null } : { Err: record.err },
  }
}

export type AccountEncoding = 'base58' | 'base64' | 'jsonParsed'

/** The `getAccountInfo` value for an address (null when it does not exist). */
export function accountValue(chain: LocalChain, address: Address, encoding: AccountEncoding) {
  const account = chain.svm.getAccount(address)
  if (!account.exists) return null
  const common = {
    executable: account.executable,
    lamports: Number(account.lamports),
    owner: account.programAddress,
    rentEpoch: 18446744073709551615n,
    space: account.data.length,
  }
  if (encoding === 'jsonParsed') {
    const program =
      account.programAddress === TOKEN_PROGRAM_ADDRESS ? 'spl-token' : 'spl-token-2022'
    const token = chain.tokenAccount(address)
    if (token) {
      return {
        ...common,
        data: {
          parsed: {
            info: {
              isNative: false,
              mint: token.mint,
              owner: token.owner,
              state: 'initialized',
              tokenAmount: uiTokenAmount(token.amount, token.decimals),
            },
            type: 'account',
          },
          program,
          space: account.data.length,
        },
      }
    }
    const isMint =
      (account.programAddress === TOKEN_PROGRAM_ADDRESS ||
        account.programAddress === TOKEN_2022_PROGRAM_ADDRESS) &&
      (account.data.length === 82 || account.data[165] === 1)
    if (isMint) {
      const data = account.data
      return {
        ...common,
        data: {
          parsed: {
            info: {
              decimals: data[44],
              freezeAuthority: u32(data, 46) === 1 ? addressAt(data, 50) : null,
              isInitialized: data[45] === 1,
              mintAuthority: u32(data, 0) === 1 ? addressAt(data, 4) : null,
              supply: u64(data, 36).toString(),
            },
            type: 'mint',
          },
          program,
          space: account.data.length,
        },
      }
    }
  }
  const bytes = new Uint8Array(account.data)
  return {
    ...common,
    data:
      encoding === 'base58'
        ? [base58.decode(bytes), 'base58']
        : [Buffer.from(bytes).toString('base64'), 'base64'],
  }
}

/** Decodes a base58 or base64 wire transaction from sendTransaction. */
export function wireBytes(encoded: string, encoding: 'base58' | 'base64'): Uint8Array {
  return encoding === 'base58'
    ? new Uint8Array(base58Bytes.encode(encoded))
    : new Uint8Array(Buffer.from(encoded, 'base64'))
}
