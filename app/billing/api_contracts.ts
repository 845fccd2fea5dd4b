/** What the billing routes take and answer (the source of their part of /openapi.json). */
import { describes, t, type Answer } from '#core/openapi/shapes'
import { defineContracts, type RouteContract } from '#core/openapi/contracts'
import {
  ForbiddenException,
  GoneException,
  ServiceUnavailableException,
} from '#core/exceptions/api_exceptions'
import {
  addonValidator,
  quoteValidator,
  subscribeValidator,
  walletLinkValidator,
} from '#billing/validators/billing_validators'
import type { PaymentView } from '#billing/services/payment_view'
import type { QuoteView } from '#billing/services/quote_service'
import type { accountFeatures, catalogue } from '#billing/services/features_service'
import type { purchaseAddon, subscribe } from '#billing/services/purchase_service'
import type { issueWalletChallenge, linkWallet } from '#billing/services/wallet_link_service'

const purchase = t.object({ kind: t.string(), key: t.string(), billingPeriod: t.string() })

const payment = t.named(
  'Payment',
  describes<PaymentView>()(
    t.object({
      id: t.uuid(),
      signature: t.string(),
      token: t.string(),
      amount: t.string({ description: 'What reached the treasury, in whole tokens' }),
      amountBaseUnits: t.string(),
      decimals: t.integer(),
      mint: t.nullable(t.string()),
      usdValue: t.number(),
      purchase,
      payer: t.string(),
      status: t.string(),
      blockTime: t.dateTime(),
      createdAt: t.dateTime(),
    })
  )
)

const activeAddon = t.object({
  key: t.string(),
  name: t.string(),
  extraAgents: t.integer(),
  expiresAt: t.dateTime(),
})

const tierPlan = t.object({
  key: t.string(),
  name: t.string(),
  usdPrice: t.number(),
  includedAgents: t.integer(),
  aiCreditsMonthly: t.integer(),
  dailyRequestLimit: t.integer(),
  maxSkills: t.integer(),
  maxSchedules: t.integer(),
  minScheduleIntervalMinutes: t.integer(),
  dailyTokenScanLimit: t.integer(),
  dailyResearchLimit: t.integer(),
})

/** The old credit-based billing routes: every method answers 410 GONE, whatever it is sent. */
const retired: RouteContract = {
  summary: 'Retired',
  description:
    'Always 410 GONE. Plans and add-ons are paid on chain: POST /features/subscribe and POST /features/addon; AI Credits live under /ai-credits.',
  deprecated: true,
  responses: {},
  errors: [GoneException],
}

/** A payment submission: checked on chain (a refused payment is 400 naming the failed check). */
const paymentFailures = [ForbiddenException, ServiceUnavailableException]

export default defineContracts({
  'features.index': {
    summary: 'Plans and add-ons',
    description:
      "Public. The tier catalogue (keyed by tier key, in `tierOrder`), the add-ons and the Founding Member slots left. `dailyRequestLimit` is the tier's daily /api/v1 request limit.",
    responses: {
      200: describes<Answer<typeof catalogue>>()(
        t.object({
          tiers: t.record(tierPlan),
          tierOrder: t.array(t.string()),
          addons: t.array(
            t.object({ key: t.string(), name: t.string(), usdPrice: t.number(), type: t.string() })
          ),
          founding: t.object({ maxSlots: t.integer(), taken: t.integer(), remaining: t.integer() }),
        })
      ),
    },
  },
  'features.subscribeWithCredits': retired,
  'features.addonWithCredits': retired,
  'credits.retired': retired,
  'credits.retiredAll': retired,
  'features.account': {
    summary: 'My plan and limits',
    description:
      "`tier` is the tier in effect; `agentLimit` = the tier's included agents plus active add-on agents; `chatLimit` is the daily request limit, `searchLimit` the daily research allowance. `platformCredits` is legacy, always 0. `subscriptionExpiresAt` is null on the free tier and for lifetime plans.",
    responses: {
      200: describes<Answer<typeof accountFeatures>>()(
        t.object({
          tier: t.string(),
          tierConfig: t.object({ key: t.string(), name: t.string(), includedAgents: t.integer() }),
          activeAddons: t.array(activeAddon),
          agentLimit: t.integer(),
          agentCount: t.integer(),
          platformCredits: t.integer({ description: 'Legacy, always 0' }),
          aiCredits: t.object({
            balance: t.integer(),
            monthlyGrant: t.integer(),
            tier: t.string(),
          }),
          subscriptionExpiresAt: t.nullable(t.dateTime()),
          chatLimit: t.integer(),
          searchLimit: t.integer(),
        })
      ),
    },
  },
  'features.quote': {
    summary: 'Quote an exact payment amount',
    description:
      'Give exactly one of `tier` or `addonKey`. Pay exactly `amount` of `token` to `recipient` (the treasury) with `memo` in a memo instruction, within 15 minutes, from any wallet; then submit the signature to /features/subscribe or /features/addon. 503 when no price is available.',
    body: quoteValidator,
    // Checked in code (purchase_service.quotePurchase): null counts as not given.
    bodyRules: {
      oneOf: [
        {
          required: ['tier'],
          properties: { tier: { not: { type: 'null' } }, addonKey: { type: 'null' } },
        },
        {
          required: ['addonKey'],
          properties: { addonKey: { not: { type: 'null' } }, tier: { type: 'null' } },
        },
      ],
    },
    responses: {
      200: describes<QuoteView>()(
        t.object({
          quoteId: t.uuid(),
          token: t.string(),
          amount: t.string(),
          amountBaseUnits: t.string(),
          decimals: t.integer(),
          mint: t.nullable(t.string()),
          recipient: t.string(),
          memo: t.string(),
          usdValue: t.number(),
          tokenUsdPrice: t.number(),
          purchase,
          expiresAt: t.dateTime(),
        })
      ),
    },
    errors: [ForbiddenException, ServiceUnavailableException],
  },
  'features.subscribe': {
    summary: 'Buy or renew a tier',
    description:
      "Verifies the on-chain payment (finalized, succeeded, paid the treasury at least the price, signed by the linked wallet or carrying this account's quote memo, at most 30 minutes old, never used before) and activates the tier. Renewing the tier in effect extends it from its expiry; annual = 12 months; founding_member is lifetime (20 slots). A refused payment is 400 VALIDATION_ERROR naming the failed check and changes nothing. `solAmount` is ignored.",
    body: subscribeValidator,
    responses: {
      200: describes<Answer<typeof subscribe>>()(
        t.object({
          tier: t.string(),
          billingPeriod: t.string(),
          subscriptionExpiresAt: t.nullable(t.dateTime()),
          foundingSlot: t.nullable(t.integer()),
          agentLimit: t.integer(),
          aiCreditsBalance: t.integer(),
          payment,
        })
      ),
    },
    errors: paymentFailures,
  },
  'features.addon': {
    summary: 'Buy an add-on',
    description:
      '`addon.agents.3`: 3 more agents for a month (annual: 12 months); packs add up. `addon.ai_credits.25000`: 25,000 AI Credits once (its `expiresAt` is null). Payment checks as for /features/subscribe.',
    body: addonValidator,
    responses: {
      200: describes<Answer<typeof purchaseAddon>>()(
        t.object({
          addon: t.object({
            key: t.string(),
            name: t.string(),
            type: t.string(),
            extraAgents: t.integer(),
            aiCredits: t.integer(),
            expiresAt: t.nullable(t.dateTime()),
          }),
          activeAddons: t.array(activeAddon),
          agentLimit: t.integer(),
          aiCreditsBalance: t.integer(),
          payment,
        })
      ),
    },
    errors: paymentFailures,
  },
  'auth.wallet.nonce': {
    summary: 'Start linking a wallet',
    description:
      "Returns a single-use challenge valid 10 minutes; sign `message` (UTF-8 bytes) with the wallet's signMessage and send the signature to POST /auth/wallet. A new challenge replaces the previous one.",
    responses: {
      200: describes<Answer<typeof issueWalletChallenge>>()(
        t.object({ nonce: t.string(), message: t.string(), expiresAt: t.dateTime() })
      ),
    },
  },
  'auth.wallet.link': {
    summary: 'Link a wallet',
    description:
      "`signature` is the wallet's ed25519 signature of the pending challenge message (base58 or base64). The wallet then pays for plans without a quote memo. 409 when the wallet is linked to another account.",
    body: walletLinkValidator,
    responses: {
      200: describes<Answer<typeof linkWallet>>()(t.object({ walletAddress: t.string() })),
    },
  },
})
