import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Ties quotes and payments to accounts now that the users table exists.
 * A deleted account takes its quotes with it; its payments stay (with no
 * account) as the record of money received.
 */
export default class extends BaseSchema {
  async up() {
    // Rows written before the users table existed may name no account.
    this.defer(async (db) => {
      await db.rawQuery('delete from quotes where user_id not in (select id from users)')
      await db.rawQuery(
        'update payments set user_id = null where user_id is not null and user_id not in (select id from users)'
      )
    })
    this.schema.alterTable('quotes', (table) => {
      table.foreign('user_id').references('id').inTable('users').onDelete('CASCADE')
    })
    this.schema.alterTable('payments', (table) => {
      table.foreign('user_id').references('id').inTable('users').onDelete('SET NULL')
    })
  }

  async down() {
    this.schema.alterTable('payments', (table) => {
      table.dropForeign('user_id')
    })
    this.schema.alterTable('quotes', (table) => {
      table.dropForeign('user_id')
    })
  }
}
