import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Verified on-chain payments. The unique signature is the replay guard: it is
 * written in the same database transaction as the activation it pays for, so
 * one transaction signature activates at most one purchase, even when
 * submitted concurrently. `user_id` references users once the identity tables
 * exist (foreign key added by a later migration).
 */
export default class extends BaseSchema {
  protected tableName = 'payments'

  async up() {
    this.schema.createTable(this.tableName, (table) => {
      table.uuid('id').primary()
      table.uuid('user_id').nullable().index()
      table.uuid('quote_id').nullable().references('id').inTable('quotes').onDelete('SET NULL')
      table.string('purchase_kind', 16).notNullable()
      table.string('purchase_key', 64).notNullable()
      table.string('billing_period', 16).notNullable()
      table.string('token', 16).notNullable()
      table.string('mint', 64).nullable()
      table.smallint('decimals').notNullable()
      table.decimal('amount_base_units', 40, 0).notNullable()
      table.decimal('usd_value', 12, 2).notNullable()
      table.string('signature', 128).notNullable().unique()
      table.string('payer', 64).notNullable()
      table.string('status', 16).notNullable().defaultTo('completed')
      table.timestamp('block_time', { useTz: true }).notNullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.timestamp('updated_at', { useTz: true }).notNullable()
    })
  }

  async down() {
    this.schema.dropTable(this.tableName)
  }
}
