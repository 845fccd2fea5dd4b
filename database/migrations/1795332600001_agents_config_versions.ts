import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Config versions of an agent: one row per config change (creation, PATCH,
 * restore), numbered 1, 2, 3 ... per agent. The same rows are the spec's
 * "config snapshots" (their `id` is the snapshot id). `config` is the full
 * config with secrets encrypted, as in agents.config.
 */
export default class extends BaseSchema {
  protected tableName = 'agent_config_versions'

  async up() {
    this.schema.createTable(this.tableName, (table) => {
      table.uuid('id').primary()
      table.uuid('agent_id').notNullable().references('id').inTable('agents').onDelete('CASCADE')
      table.integer('version').notNullable()
      table.text('message').notNullable()
      table.jsonb('config').notNullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.unique(['agent_id', 'version'])
    })
  }

  async down() {
    this.schema.dropTable(this.tableName)
  }
}
