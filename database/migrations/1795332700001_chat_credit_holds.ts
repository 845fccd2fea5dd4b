import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * AI Credits held for hosted model requests in flight. A request reserves
 * its estimated cost (taken from `users.ai_credits_balance` in the same
 * statement that inserts the hold), then settles: the hold is returned and
 * the real cost debited through the ledger, in one transaction. Holds of
 * requests that never settled (a crash) are returned by a job after
 * `expires_at`. So: ledger sum = balance + open holds.
 */
export default class extends BaseSchema {
  protected tableName = 'chat_credit_holds'

  async up() {
    this.schema.createTable(this.tableName, (table) => {
      table.uuid('id').primary()
      table.uuid('user_id').notNullable().references('id').inTable('users').onDelete('CASCADE')
      table.integer('credits').notNullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.timestamp('expires_at', { useTz: true }).notNullable()
      table.index(['expires_at'])
      table.index(['user_id'])
    })
    this.schema.raw(
      `alter table chat_credit_holds add constraint chat_credit_holds_credits_check check (credits >= 0)`
    )
  }

  async down() {
    this.schema.dropTable(this.tableName)
  }
}
