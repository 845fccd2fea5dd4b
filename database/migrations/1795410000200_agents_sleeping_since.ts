import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * When an `active` agent was put to sleep (idle, or to make room); null
 * while its container runs or boots. A restarted service leaves sleeping
 * agents asleep instead of booting them all at once.
 */
export default class extends BaseSchema {
  async up() {
    this.schema.alterTable('agents', (table) => {
      table.timestamp('sleeping_since', { useTz: true }).nullable()
    })
  }

  async down() {
    this.schema.alterTable('agents', (table) => {
      table.dropColumn('sleeping_since')
    })
  }
}
