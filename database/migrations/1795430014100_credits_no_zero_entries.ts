import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * The ledger holds no zero-credit entries: a call that cost nothing (the
 * free local-dev model) is not a debit, and the usage history lists debits
 * only, each with the positive number of credits it cost. Earlier 0-credit
 * `llm` rows change no balance, so they go.
 */
export default class extends BaseSchema {
  async up() {
    this.schema.raw('delete from credit_ledger where credits = 0')
    this.schema.raw(
      'alter table credit_ledger add constraint credit_ledger_credits_nonzero check (credits <> 0)'
    )
  }

  async down() {
    this.schema.raw(
      'alter table credit_ledger drop constraint if exists credit_ledger_credits_nonzero'
    )
  }
}
