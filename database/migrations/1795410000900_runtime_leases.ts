import { BaseSchema } from '@adonisjs/lucid/schema'

/** Named leases held by one service instance at a time (the engine reconciler's). */
export default class extends BaseSchema {
  async up() {
    this.schema.createTable('runtime_leases', (table) => {
      table.string('name', 100).primary()
      table.string('holder', 200).notNullable()
      table.timestamp('expires_at', { useTz: true }).notNullable()
    })
  }

  async down() {
    this.schema.dropTable('runtime_leases')
  }
}
