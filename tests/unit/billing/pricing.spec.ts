import { test } from '@japa/runner'
import { ValidationException } from '#core/exceptions/api_exceptions'
import {
  baseUnitsForUsd,
  describePurchase,
  formatBaseUnits,
  purchaseUsdCents,
  samePurchase,
  withTolerance,
} from '#billing/services/pricing'

test.group('Billing pricing', () => {
  test('catalogue prices in cents: annual is 10 monthly prices, lifetime and one-time ignore the period', ({
    assert,
  }) => {
    assert.equal(purchaseUsdCents({ kind: 'tier', key: 'starter', billingPeriod: 'monthly' }), 699)
    assert.equal(purchaseUsdCents({ kind: 'tier', key: 'pro', billingPeriod: 'annual' }), 19_990)
    assert.equal(
      purchaseUsdCents({ kind: 'tier', key: 'founding_member', billingPeriod: 'annual' }),
      9_900
    )
    assert.equal(
      purchaseUsdCents({ kind: 'addon', key: 'addon.agents.3', billingPeriod: 'annual' }),
      6_990
    )
    assert.equal(
      purchaseUsdCents({ kind: 'addon', key: 'addon.ai_credits.25000', billingPeriod: 'annual' }),
      3_000
    )
    assert.throws(
      () => purchaseUsdCents({ kind: 'tier', key: 'free', billingPeriod: 'monthly' }),
      ValidationException as any
    )
  })

  test('token amounts are exact and rounded up', ({ assert }) => {
    assert.equal(baseUnitsForUsd(699, 150, 9), 46_600_000n)
    assert.equal(baseUnitsForUsd(1999, 150, 9), 133_266_667n)
    assert.equal(baseUnitsForUsd(699, 1, 6), 6_990_000n)
    assert.equal(baseUnitsForUsd(699, 0.02, 9), 349_500_000_000n)
    // Prices JS prints in exponent form, and amounts beyond 2^53.
    assert.equal(baseUnitsForUsd(9900, 1e-7, 9), 990_000_000_000_000_000n)
    assert.equal(baseUnitsForUsd(100, 1.5e21, 9), 1n)
  })

  test('tolerance and formatting', ({ assert }) => {
    assert.equal(withTolerance(46_600_000n, 2), 45_668_000n)
    assert.equal(formatBaseUnits(46_600_000n, 9), '0.0466')
    assert.equal(formatBaseUnits(6_990_000n, 6), '6.99')
    assert.equal(formatBaseUnits(1_000_000_000n, 9), '1')
    assert.equal(formatBaseUnits(0n, 6), '0')
  })

  test('purchases compare by what they buy', ({ assert }) => {
    const lifetime = { kind: 'tier', key: 'founding_member', billingPeriod: 'monthly' } as const
    assert.isTrue(samePurchase(lifetime, { ...lifetime, billingPeriod: 'annual' }))
    const pro = { kind: 'tier', key: 'pro', billingPeriod: 'monthly' } as const
    assert.isFalse(samePurchase(pro, { ...pro, billingPeriod: 'annual' }))
    assert.equal(describePurchase(pro), 'pro (monthly)')
    assert.equal(describePurchase(lifetime), 'founding_member (lifetime)')
  })
})
