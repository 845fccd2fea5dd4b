import type { Rpc, SolanaRpcApi } from '@solana/kit'
import { boundedSolanaRpc } from '#billing/services/solana_rpc'
import { requireToolSetting } from '#tools/services/tool_settings'

let client: { url: string; rpc: Rpc<SolanaRpcApi> } | undefined

/**
 * The @solana/kit client for SOLANA_RPC_URL; unset: 503 naming the variable
 * and the tool (billing's client would speak of payments). Calls go through
 * billing's `rpcRequest` (a node error is a 503, never a 500).
 */
export function toolsRpc(purpose: string): Rpc<SolanaRpcApi> {
  const url = requireToolSetting('SOLANA_RPC_URL', purpose)
  if (client?.url !== url) client = { url, rpc: boundedSolanaRpc(url) }
  return client.rpc
}
