/** What the tools routes take and answer (the source of their part of /openapi.json). */
import { t } from '#core/openapi/shapes'
import { defineContracts } from '#core/openapi/contracts'
import {
  AgentNotRunningException,
  ForbiddenException,
  InsufficientCreditsException,
  RateLimitExceededException,
  ServiceUnavailableException,
} from '#core/exceptions/api_exceptions'
import {
  SOLANA_ADDRESS_SCHEMA,
  researchValidator,
  scanTokenValidator,
  walletWatchValidator,
} from '#tools/validators/tool_validators'

/** The daily allowance of the plan, AI Credits for the model's summary, the price feeds. */
const toolFailures = [
  ForbiddenException,
  InsufficientCreditsException,
  RateLimitExceededException,
  ServiceUnavailableException,
]

export default defineContracts({
  'agents.tools.scanToken': {
    summary: 'Scan a token',
    description:
      'Reads the mint over Solana JSON-RPC (decimals, supply, authorities), its name and symbol from Metaplex metadata or the Token-2022 metadata extension, the USD price from TOKEN_PRICE_API_URL, and an AI risk analysis from the hosted model (metered in AI Credits). 400 for a mint that is not base58 of 32 bytes, 404 when no mint exists there, 429 after 10 scans a day per account, 503 when SOLANA_RPC_URL or TOKEN_PRICE_API_URL is unset. A mint scanned in the last minute is answered from cache (still one scan).',
    body: scanTokenValidator,
    // The service checks the address (400 when it is not one).
    bodyRules: { properties: { mintAddress: SOLANA_ADDRESS_SCHEMA } },
    responses: {
      200: t.object({
        mintAddress: t.string(),
        name: t.nullable(t.string()),
        symbol: t.nullable(t.string()),
        decimals: t.integer(),
        price: t.nullable(t.number()),
        marketCap: t.nullable(t.number()),
        aiSummary: t.string(),
        scannedAt: t.dateTime(),
        supply: t.string(),
        priceAvailable: t.boolean(),
        mintAuthority: t.nullable(t.string()),
        freezeAuthority: t.nullable(t.string()),
        tokenProgram: t.string(),
        model: t.string(),
      }),
    },
    errors: toolFailures,
  },
  'agents.tools.research': {
    summary: 'Research a question',
    description:
      'One answer from the hosted model (metered in AI Credits), stored; `model` names the model that answered. 20 a day per account (429 after).',
    body: researchValidator,
    responses: {
      200: t.object({
        query: t.string(),
        result: t.string(),
        model: t.string(),
        completedAt: t.dateTime(),
      }),
    },
    errors: [...toolFailures, AgentNotRunningException],
  },
  'agents.tools.walletWatch': {
    summary: 'Watched wallets',
    description:
      "Each watched wallet with its balance (getBalance; USD at the SOL price of PRICE_API_URL) and its 10 most recent transactions (getSignaturesForAddress and getTransaction): `type` in, out or other, `amount` in SOL without the fee, `ts` in Unix seconds. A wallet's chain data is cached 30 s.",
    responses: {
      200: t.object({
        watchedWallets: t.array(
          t.object({
            address: t.string(),
            balance: t.object({ sol: t.number(), usd: t.nullable(t.number()) }),
            transactions: t.array(
              t.object({
                signature: t.string(),
                type: t.string(),
                amount: t.number(),
                ts: t.integer(),
              })
            ),
          })
        ),
      }),
    },
    errors: [ForbiddenException, ServiceUnavailableException],
  },
  'agents.tools.setWalletWatch': {
    summary: 'Set watched wallets',
    description:
      "Replaces the agent's watched wallets with 1 to 3 Solana addresses (duplicates counted once). 400 for anything else.",
    body: walletWatchValidator,
    responses: { 200: t.object({ wallets: t.array(t.string()) }) },
    errors: [ForbiddenException],
  },
})
