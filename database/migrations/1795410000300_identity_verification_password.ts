import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * A verification link carries the password hash of the registration that
 * asked for it: verifying sets that password, so whoever registered an
 * address first (without owning it) never holds the verified account.
 */
export default class extends BaseSchema {
  async up() {
    this.schema.alterTable('email_verification_tokens', (table) => {
      table.text('password_hash').nullable()
      // A registration's own link (kept until used or expired); resends replace each other.
      table.boolean('from_registration').notNullable().defaultTo(false)
    })
  }

  async down() {
    this.schema.alterTable('email_verification_tokens', (table) => {
      table.dropColumn('password_hash')
      table.dropColumn('from_registration')
    })
  }
}
