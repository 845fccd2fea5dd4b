import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { InsufficientCreditsException } from '#core/exceptions/api_exceptions'
import creditLedger from '#credits/services/credit_ledger'
import { grantMonthlyCredits, monthlyGrantKey } from '#credits/services/monthly_grant'
import { tiers } from '#config/plans'
import { createUser, creditsOf } from '#tests/helpers/identity'
import { answersWritten } from '#tests/helpers/answers_written'

async function ledgerSum(userId: string) {
  await answersWritten()
  const rows = await db.from('credit_ledger').where('user_id', userId).sum('credits as total')
  return Number(rows[0].total ?? 0)
}

test.group('Credit ledger service', () => {
  test('credit and debit keep balance and ledger in step', async ({ assert }) => {
    const user = await createUser()
    const credited = await creditLedger.credit(user.id, 300, { kind: 'purchase', reason: 'pack' })
    assert.equal(credited.balance, 300)
    assert.isTrue(credited.applied)
    const debited = await creditLedger.debit(user.id, 120, {
      kind: 'llm',
      provider: 'openai',
      model: 'm',
      inputTokens: 10,
      outputTokens: 20,
    })
    assert.equal(debited.balance, 180)
    assert.equal(debited.entry.credits, -120)
    assert.equal(debited.entry.balanceAfter, 180)
    assert.equal(await creditsOf(user), 180)
    assert.equal(await ledgerSum(user.id), 180)
  })

  test('a debit beyond the balance is refused and changes nothing', async ({ assert }) => {
    const user = await createUser({ credits: 50 })
    await assert.rejects(
      () => creditLedger.debit(user.id, 51, { kind: 'llm' }),
      InsufficientCreditsException as any
    )
    assert.equal(await creditsOf(user), 50)
    assert.equal(await ledgerSum(user.id), 50)
  })

  test('concurrent debits never overspend', async ({ assert }) => {
    const user = await createUser({ credits: 500 })
    const results = await Promise.allSettled(
      Array.from({ length: 12 }, () => creditLedger.debit(user.id, 100, { kind: 'llm' }))
    )
    const ok = results.filter((r) => r.status === 'fulfilled')
    const refused = results.filter(
      (r) => r.status === 'rejected' && r.reason instanceof InsufficientCreditsException
    )
    assert.lengthOf(ok, 5)
    assert.lengthOf(refused, 7)
    assert.equal(await creditsOf(user), 0)
    assert.equal(await ledgerSum(user.id), 0)
  })

  test('the ledger holds no zero-credit entries: a zero debit is refused, by the service and the table', async ({
    assert,
  }) => {
    const user = await createUser({ credits: 10 })
    await assert.rejects(
      () => creditLedger.debit(user.id, 0, { kind: 'llm', model: 'local-dev' }),
      /positive integer/
    )
    await assert.rejects(
      () =>
        db.table('credit_ledger').insert({
          id: crypto.randomUUID(),
          user_id: user.id,
          kind: 'llm',
          credits: 0,
          balance_after: 10,
          created_at: new Date(),
        }),
      /credit_ledger_credits_nonzero/
    )
    assert.lengthOf(await db.from('credit_ledger').where({ user_id: user.id, credits: 0 }), 0)
    assert.equal(await creditsOf(user), 10)
  })

  test('inside a caller transaction, a rollback undoes balance and entry', async ({ assert }) => {
    const user = await createUser({ credits: 10 })
    await assert.rejects(() =>
      db.transaction(async (trx) => {
        await creditLedger.credit(user.id, 90, { kind: 'grant', trx })
        throw new Error('abort')
      })
    )
    assert.equal(await creditsOf(user), 10)
    assert.equal(await ledgerSum(user.id), 10)
  })

  test('an idempotency key applies a change once, even concurrently', async ({ assert }) => {
    const user = await createUser()
    const results = await Promise.all(
      Array.from({ length: 4 }, () =>
        creditLedger.credit(user.id, 500, { kind: 'referral', idempotencyKey: `ref:${user.id}` })
      )
    )
    assert.equal(results.filter((r) => r.applied).length, 1)
    assert.equal(await creditsOf(user), 500)
  })

  test('the monthly grant comes from the tier and happens once per month', async ({ assert }) => {
    const user = await createUser({ tier: 'starter' })
    const first = await grantMonthlyCredits(user)
    const second = await grantMonthlyCredits(user)
    assert.equal(first!.entry.credits, tiers.starter.aiCreditsMonthly)
    assert.equal(first!.entry.kind, 'monthly')
    assert.isFalse(second!.applied)
    const nextMonth = new Date(Date.now() + 32 * 86_400_000)
    const third = await grantMonthlyCredits(user, { now: nextMonth })
    assert.isTrue(third!.applied)
    assert.equal(third!.entry.idempotencyKey, monthlyGrantKey(user.id, nextMonth))
    assert.equal(await creditsOf(user), 2 * tiers.starter.aiCreditsMonthly)
  })

  test('the database refuses a negative balance whatever the caller does', async ({ assert }) => {
    const user = await createUser({ credits: 1 })
    await assert.rejects(() =>
      db.from('users').where('id', user.id).update({ ai_credits_balance: -1 })
    )
  })
})
