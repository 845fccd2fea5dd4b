import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * A registration's link carries that registration's username and referrer
 * too (like its password hash): verifying applies them, so whoever
 * registered an address first without owning it leaves nothing on the
 * owner's account (not their name, not their referrer).
 */
export default class extends BaseSchema {
  async up() {
    this.schema.alterTable('email_verification_tokens', (table) => {
      table.string('username', 30).nullable()
      table.uuid('referred_by_id').nullable().references('id').inTable('users').onDelete('SET NULL')
    })
  }

  async down() {
    this.schema.alterTable('email_verification_tokens', (table) => {
      table.dropColumn('username')
      table.dropColumn('referred_by_id')
    })
  }
}
