/** What the referrals routes take and answer (the source of their part of /openapi.json). */
import { t } from '#core/openapi/shapes'
import { defineContracts } from '#core/openapi/contracts'

export default defineContracts({
  'referrals.validate': {
    summary: 'Check a referral code',
    description: 'Public. `referrerUsername` is null when the code is not valid.',
    responses: {
      200: t.object({
        valid: t.boolean(),
        referrerUsername: t.nullable(t.string()),
      }),
    },
  },
  'referrals.myCode': {
    summary: 'My referral code',
    description: '`shareLink` opens registration with the code filled in.',
    responses: {
      200: t.object({
        referralCode: t.string(),
        shareLink: t.string(),
        username: t.string(),
      }),
    },
  },
  'referrals.stats': {
    summary: 'My referrals',
    description:
      '`totalEarned` is the AI Credits the caller received for referrals; `referrals` lists the newest 500 accounts referred.',
    responses: {
      200: t.object({
        totalReferred: t.integer(),
        totalEarned: t.integer(),
        rewardPerReferral: t.integer(),
        rewardUnit: t.string(),
        referrals: t.array(
          t.object({
            username: t.string(),
            date: t.dateTime(),
            rewardClaimed: t.boolean(),
          })
        ),
      }),
    },
  },
  'referrals.claim': {
    summary: 'Claim referral rewards',
    description:
      'Pays every eligible referral not paid yet (the invited account verified its e-mail and created an agent): 500 AI Credits to the caller and 500 to the invited account, each once. `totalCredited` went to the caller, `referredCredited` to the invited accounts.',
    responses: {
      200: t.object({
        claimed: t.integer(),
        totalCredited: t.integer(),
        referredCredited: t.integer(),
        totalAiCreditsGranted: t.integer(),
        unit: t.string(),
        message: t.string(),
      }),
    },
  },
})
