import { test } from '@japa/runner'
import { bytes, utc } from '#console/services/view_helpers'

test.group('Console view helpers: sizes and plain UTC times', () => {
  test('bytes() reads like people write sizes, in units of 1024', ({ assert }) => {
    assert.equal(bytes(0), '0 B')
    assert.equal(bytes(1023), '1023 B')
    assert.equal(bytes(1024), '1.0 KB')
    assert.equal(bytes(4506), '4.4 KB')
    assert.equal(bytes('157286400'), '150 MB', 'a bigint column arrives as a string')
    assert.equal(bytes(5 * 1024 ** 5), '5120 TB')
    assert.equal(bytes(-1), '—')
    assert.equal(bytes(null), '—')
  })

  test('utc() is the fixed UTC text of when(), without markup', ({ assert }) => {
    assert.equal(utc('2026-11-28T00:53:43.140Z'), '2026-11-28 00:53 UTC')
    assert.equal(utc(new Date(Date.UTC(2026, 0, 2, 3, 4, 5))), '2026-01-02 03:04 UTC')
    assert.equal(utc(null), '')
  })
})
