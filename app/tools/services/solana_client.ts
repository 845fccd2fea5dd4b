import { createSolanaRpc, type Rpc, type SolanaRpcApi } from '@solana/kit'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import { requireToolSetting } from '#tools/services/tool_settings'

let client: { url: string; rpc: Rpc<SolanaRpcApi> } | undefined

/** The @solana/kit client for SOLANA_RPC_URL (503 naming the variable when unset). */
export function toolsRpc(purpose: string): Rpc<SolanaRpcApi> {
  const url = requireToolSetting('SOLANA_RPC_URL', purpose)
  if (client?.url !== url) client = { url, rpc: createSolanaRpc(url) }
  return client.rpc
}

/** One RPC round trip; a node that is down or answers an error is a 503, never a 500. */
export async function rpcCall<T>(send: () => Promise<T>): Promise<T> {
  try {
    return await send()
  } catch (error) {
    throw new ServiceUnavailableException(
      'The Solana RPC node could not be reached or answered with an error; try again shortly',
      { cause: error }
    )
  }
}
