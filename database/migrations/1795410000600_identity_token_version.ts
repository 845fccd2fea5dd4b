import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Every dashboard JWT carries the account's token version; bumping it
 * (sign-out, a revoked refresh family) ends every JWT issued before, at
 * once, instead of when they expire 7 days later.
 */
export default class extends BaseSchema {
  async up() {
    this.schema.alterTable('users', (table) => {
      table.integer('token_version').notNullable().defaultTo(0)
    })
  }

  async down() {
    this.schema.alterTable('users', (table) => {
      table.dropColumn('token_version')
    })
  }
}
