import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Swarm agents' state between nodes (docs/runtime.md "Many machines"): per
 * agent, its newest snapshot (a PostgreSQL large object, encrypted), the
 * task whose gate was opened last and the rendered files every new task
 * gets. Written by the swarm driver only; removed with the agent's service.
 */
export default class extends BaseSchema {
  async up() {
    this.schema.createTable('swarm_agent_states', (table) => {
      table.uuid('agent_id').primary()
      table.integer('generation').notNullable().defaultTo(0)
      table.specificType('snapshot_oid', 'oid').nullable()
      table.binary('snapshot_iv').nullable()
      table.binary('snapshot_tag').nullable()
      table.string('snapshot_sha256', 64).nullable()
      table.bigInteger('snapshot_bytes').nullable()
      table.string('snapshot_of', 64).nullable()
      table.timestamp('taken_at', { useTz: true }).nullable()
      table.boolean('final').notNullable().defaultTo(false)
      table.string('released_task', 64).nullable()
      table.binary('rendered').nullable()
      table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(this.now())
    })
  }

  async down() {
    this.schema.raw(
      'select lo_unlink(snapshot_oid) from swarm_agent_states where snapshot_oid is not null'
    )
    this.schema.dropTable('swarm_agent_states')
  }
}
