import vine from '@vinejs/vine'

/** Spec: `limit` 1 to 100, default 20. */
export const historyValidator = vine.create({
  limit: vine.number().withoutDecimals().range([1, 100]).optional(),
})

export const grantValidator = vine.create({
  userId: vine.string().uuid(),
  credits: vine.number().withoutDecimals().min(1).max(100_000_000),
  reason: vine.string().trim().minLength(1).maxLength(500),
})

/** PUT /ai-credits/budget: a positive integer, or null for no account budget. */
export const accountBudgetValidator = vine.create({
  monthlyCredits: vine
    .number({ strict: true })
    .withoutDecimals()
    .range([1, 1_000_000_000])
    .nullable(),
})
