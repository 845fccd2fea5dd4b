import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Each credit hold records the instance that took it, so the holds of an
 * instance that died mid-request (kill -9, OOM) come back as soon as that
 * is provable, instead of after the hold's expiry.
 */
export default class extends BaseSchema {
  async up() {
    this.schema.alterTable('chat_credit_holds', (table) => {
      table.string('holder', 200).nullable()
    })
    this.schema.raw('create index chat_credit_holds_holder on chat_credit_holds (holder)')
  }

  async down() {
    this.schema.alterTable('chat_credit_holds', (table) => {
      table.dropColumn('holder')
    })
  }
}
