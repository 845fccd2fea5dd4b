import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * The activity feed of an agent (GET /agents/:id/feed): `status_change`,
 * `error` and `message` events, newest read first. `seq` orders events
 * written within the same millisecond.
 */
export default class extends BaseSchema {
  protected tableName = 'agent_feed_events'

  async up() {
    this.schema.createTable(this.tableName, (table) => {
      table.uuid('id').primary()
      table.bigIncrements('seq', { primaryKey: false })
      table.uuid('agent_id').notNullable().references('id').inTable('agents').onDelete('CASCADE')
      table.string('type', 32).notNullable()
      table.text('content').notNullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.index(['agent_id', 'seq'])
    })
  }

  async down() {
    this.schema.dropTable(this.tableName)
  }
}
