import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Accounts. E-mail is stored lower-case and unique case-insensitively; the
 * AI Credit balance can never go negative (the ledger keeps it in step).
 */
export default class extends BaseSchema {
  protected tableName = 'users'

  async up() {
    this.schema.createTable(this.tableName, (table) => {
      table.uuid('id').primary()
      table.string('email', 254).notNullable()
      table.string('username', 30).notNullable().unique()
      table.string('password', 255).notNullable()
      table.timestamp('email_verified_at', { useTz: true }).nullable()
      table.string('role', 16).notNullable().defaultTo('user')
      table.string('tier', 32).notNullable().defaultTo('free')
      table.string('referral_code', 16).notNullable().unique()
      table.uuid('referred_by_id').nullable().references('id').inTable('users').onDelete('SET NULL')
      table.string('wallet_address', 64).nullable()
      table.integer('ai_credits_balance').notNullable().defaultTo(0)
      table.timestamp('subscription_expires_at', { useTz: true }).nullable()
      table.timestamp('disabled_at', { useTz: true }).nullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.timestamp('updated_at', { useTz: true }).notNullable()
      table.index(['referred_by_id'])
    })
    this.schema.raw('create unique index users_email_lower_unique on users (lower(email))')
    this.schema.raw(
      `alter table users add constraint users_role_check check (role in ('user', 'support', 'operator', 'admin'))`
    )
    this.schema.raw(
      'alter table users add constraint users_ai_credits_balance_check check (ai_credits_balance >= 0)'
    )
  }

  async down() {
    this.schema.dropTable(this.tableName)
  }
}
