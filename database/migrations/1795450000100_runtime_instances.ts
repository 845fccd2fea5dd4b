import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * The service instances running now (app/runtime/placement): each renews
 * its row while it runs, with the address of its peer link, so another
 * instance can reach the one that holds an agent (docs/runtime.md "Many
 * machines"). Agents' own leases are rows of runtime_leases named
 * `agent:<id>`.
 */
export default class extends BaseSchema {
  async up() {
    this.schema.createTable('runtime_instances', (table) => {
      table.string('id', 200).primary()
      table.string('host', 200).notNullable()
      table.string('peer_url', 200).notNullable()
      /** Set at a clean shutdown's start: it hands nothing more over and takes nothing on. */
      table.boolean('stopping').notNullable().defaultTo(false)
      table.timestamp('seen_at', { useTz: true }).notNullable()
      table.index(['host'])
    })
  }

  async down() {
    this.schema.dropTable('runtime_instances')
  }
}
