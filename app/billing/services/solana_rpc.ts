import {
  createDefaultRpcTransport,
  createSolanaRpcFromTransport,
  isAddress,
  type Address,
  type Rpc,
  type RpcTransport,
  type SolanaRpcApi,
} from '@solana/kit'
import {
  findAssociatedTokenPda,
  getMintDecoder,
  TOKEN_PROGRAM_ADDRESS,
} from '@solana-program/token'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import { requirePaymentSetting, type PaymentSetting } from '#billing/services/payment_config'

/** The SPL Token-2022 program (not in @solana-program/token, which targets the classic program). */
export const TOKEN_2022_PROGRAM_ADDRESS =
  'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb' as Address<'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb'>

export const TOKEN_PROGRAMS: readonly Address[] = [
  TOKEN_PROGRAM_ADDRESS,
  TOKEN_2022_PROGRAM_ADDRESS,
]

/**
 * Longest wait for one RPC answer: a node that hangs must not hold a
 * payment or a tool call. Mutable so tests can shorten it.
 */
export const rpcLimits = { timeoutMs: 10_000 }

/**
 * A @solana/kit client whose every request gives up after `rpcLimits.timeoutMs`
 * (the default transport has no timeout of its own).
 */
export function boundedSolanaRpc(url: string): Rpc<SolanaRpcApi> {
  const transport = createDefaultRpcTransport({ url })
  const bounded: RpcTransport = (config) => {
    const timeout = AbortSignal.timeout(rpcLimits.timeoutMs)
    return transport({
      ...config,
      signal: config.signal ? AbortSignal.any([config.signal, timeout]) : timeout,
    })
  }
  return createSolanaRpcFromTransport(bounded)
}

let client: { url: string; rpc: Rpc<SolanaRpcApi> } | undefined

/** The RPC client for SOLANA_RPC_URL (503 naming the variable when unset). */
export function solanaRpc(): Rpc<SolanaRpcApi> {
  const url = requirePaymentSetting('SOLANA_RPC_URL')
  if (client?.url !== url) client = { url, rpc: boundedSolanaRpc(url) }
  return client.rpc
}

/** A configured address setting, checked to be a base58 address. */
export function requireAddressSetting(name: PaymentSetting): Address {
  const value = requirePaymentSetting(name)
  if (!isAddress(value)) {
    throw new ServiceUnavailableException(
      `Payments are misconfigured: ${name} is not a valid Solana address`
    )
  }
  return value
}

/**
 * Runs one RPC request; a node that cannot be reached, times out or
 * answers with an error is the service's problem, not the client's: 503.
 */
export async function rpcRequest<T>(send: () => Promise<T>): Promise<T> {
  try {
    return await send()
  } catch (error) {
    throw new ServiceUnavailableException(
      'The Solana RPC node could not be reached or answered with an error; try again shortly',
      { cause: error }
    )
  }
}

const decimalsCache = new Map<string, { decimals: number; program: Address }>()

/**
 * Decimals and owning token program of a mint, read once per RPC endpoint
 * with getAccountInfo (a mint's decimals never change).
 */
export async function mintInfo(
  mint: Address,
  setting: PaymentSetting
): Promise<{ decimals: number; program: Address }> {
  const url = requirePaymentSetting('SOLANA_RPC_URL')
  const key = `${url}|${mint}`
  const cached = decimalsCache.get(key)
  if (cached) return cached
  const { value } = await rpcRequest(() =>
    solanaRpc().getAccountInfo(mint, { commitment: 'finalized', encoding: 'base64' }).send()
  )
  if (!value || !TOKEN_PROGRAMS.includes(value.owner)) {
    throw new ServiceUnavailableException(
      `Payments are misconfigured: ${setting} (${mint}) is not a token mint on the configured network`
    )
  }
  const data = Buffer.from(value.data[0], 'base64')
  if (data.length < 82) {
    throw new ServiceUnavailableException(
      `Payments are misconfigured: ${setting} (${mint}) is not a token mint on the configured network`
    )
  }
  const info = {
    decimals: getMintDecoder().decode(data.subarray(0, 82)).decimals,
    program: value.owner,
  }
  decimalsCache.set(key, info)
  return info
}

/** The associated token account of `owner` for `mint` under a token program. */
export async function associatedTokenAddress(
  owner: Address,
  mint: Address,
  tokenProgram: Address
): Promise<Address> {
  const [ata] = await findAssociatedTokenPda({ owner, mint, tokenProgram })
  return ata
}
