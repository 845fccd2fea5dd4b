import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Payment quotes: an exact amount of one token for one purchase, identified on
 * chain by an unguessable memo, valid 15 minutes. `user_id` references users
 * once the identity tables exist (foreign key added by a later migration).
 */
export default class extends BaseSchema {
  protected tableName = 'quotes'

  async up() {
    this.schema.createTable(this.tableName, (table) => {
      table.uuid('id').primary()
      table.uuid('user_id').notNullable().index()
      table.string('purchase_kind', 16).notNullable()
      table.string('purchase_key', 64).notNullable()
      table.string('billing_period', 16).notNullable()
      table.string('token', 16).notNullable()
      table.string('mint', 64).nullable()
      table.smallint('decimals').notNullable()
      table.decimal('amount_base_units', 40, 0).notNullable()
      table.decimal('usd_value', 12, 2).notNullable()
      table.double('token_usd_price').notNullable()
      table.string('memo', 64).notNullable().unique()
      table.timestamp('expires_at', { useTz: true }).notNullable()
      table.timestamp('used_at', { useTz: true }).nullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.timestamp('updated_at', { useTz: true }).notNullable()
    })
  }

  async down() {
    this.schema.dropTable(this.tableName)
  }
}
