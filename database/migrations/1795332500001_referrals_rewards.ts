import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Paid referral rewards: one row per referred account, written in the same
 * transaction as the two ledger entries, so a referral is paid at most once
 * (the unique `referred_id`) however many claims run at the same time.
 */
export default class extends BaseSchema {
  protected tableName = 'referral_rewards'

  async up() {
    this.schema.createTable(this.tableName, (table) => {
      table.uuid('id').primary()
      table.uuid('referrer_id').nullable().references('id').inTable('users').onDelete('SET NULL')
      table
        .uuid('referred_id')
        .notNullable()
        .unique()
        .references('id')
        .inTable('users')
        .onDelete('CASCADE')
      table.integer('credits_each').notNullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.index(['referrer_id'])
    })
  }

  async down() {
    this.schema.dropTable(this.tableName)
  }
}
