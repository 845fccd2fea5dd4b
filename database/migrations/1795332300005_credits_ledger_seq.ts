import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Insertion order of ledger entries: entries written within the same
 * millisecond still list in the order they happened.
 */
export default class extends BaseSchema {
  protected tableName = 'credit_ledger'

  async up() {
    this.schema.raw('alter table credit_ledger add column seq bigserial not null')
    this.schema.raw('create index credit_ledger_user_seq on credit_ledger (user_id, seq desc)')
  }

  async down() {
    this.schema.raw('drop index if exists credit_ledger_user_seq')
    this.schema.raw('alter table credit_ledger drop column seq')
  }
}
