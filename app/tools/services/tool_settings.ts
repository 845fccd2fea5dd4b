import env from '#start/env'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'

export type ToolSetting = 'SOLANA_RPC_URL' | 'TOKEN_PRICE_API_URL' | 'PRICE_API_URL'

/**
 * A tool's setting, read on every call (an operator's change and a test's
 * override apply at once); unset: 503 naming the variable and what it stops.
 */
export function requireToolSetting(name: ToolSetting, purpose: string): string {
  const value = env.get(name)
  if (typeof value !== 'string' || value.trim() === '') {
    throw new ServiceUnavailableException(`${purpose} is not available: ${name} is not set`)
  }
  return value.trim()
}
