import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Every change of an AI Credit balance, signed (+ credit, - debit), written in
 * the same transaction as the balance update on users. `idempotency_key`
 * makes a grant that must happen once (monthly grant of a period, a reward,
 * a purchase) safe to retry.
 */
export default class extends BaseSchema {
  protected tableName = 'credit_ledger'

  async up() {
    this.schema.createTable(this.tableName, (table) => {
      table.uuid('id').primary()
      table.uuid('user_id').notNullable().references('id').inTable('users').onDelete('CASCADE')
      table.string('kind', 32).notNullable()
      table.integer('credits').notNullable()
      table.integer('balance_after').notNullable()
      table.text('reason').nullable()
      table.uuid('actor_id').nullable().references('id').inTable('users').onDelete('SET NULL')
      table.string('provider', 64).nullable()
      table.string('model', 128).nullable()
      table.integer('input_tokens').nullable()
      table.integer('output_tokens').nullable()
      table.jsonb('metadata').nullable()
      table.string('idempotency_key', 191).nullable().unique()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.index(['user_id', 'created_at'])
    })
  }

  async down() {
    this.schema.dropTable(this.tableName)
  }
}
