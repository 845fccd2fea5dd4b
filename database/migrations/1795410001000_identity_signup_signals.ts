import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Signals that tell one person's accounts apart (referral rewards need a
 * distinct person): the address with its aliases folded, and the sign-up
 * client address as a keyed hash (never the address itself).
 */
export default class extends BaseSchema {
  async up() {
    this.schema.alterTable('users', (table) => {
      table.string('email_canonical', 320).nullable().index()
      table.string('signup_ip_hash', 64).nullable().index()
    })
  }

  async down() {
    this.schema.alterTable('users', (table) => {
      table.dropColumn('email_canonical')
      table.dropColumn('signup_ip_hash')
    })
  }
}
