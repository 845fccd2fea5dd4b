import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Agents. `config` is jsonb whose secret values (keys ending in key, token,
 * secret, password) are stored encrypted (app/agents/services/config_secrets.ts).
 * The model-proxy and webhook tokens are stored as SHA-256 (lookup) plus an
 * encrypted copy (the container and GET /agents/:id/webhook-url need the
 * clear value).
 */
export default class extends BaseSchema {
  protected tableName = 'agents'

  async up() {
    this.schema.createTable(this.tableName, (table) => {
      table.uuid('id').primary()
      table.uuid('user_id').notNullable().references('id').inTable('users').onDelete('CASCADE')
      table.string('name', 50).notNullable()
      table.string('slug', 80).notNullable().unique()
      table.text('description').nullable()
      table.text('avatar_url').nullable()
      table.string('framework', 40).notNullable()
      table.string('status', 16).notNullable().defaultTo('active')
      table.jsonb('config').notNullable().defaultTo('{}')
      table.integer('message_count').notNullable().defaultTo(0)
      table.timestamp('last_active_at', { useTz: true }).nullable()
      table.string('proxy_token_hash', 64).notNullable().unique()
      table.text('proxy_token_encrypted').notNullable()
      table.string('webhook_token_hash', 64).notNullable().unique()
      table.text('webhook_token_encrypted').notNullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.timestamp('updated_at', { useTz: true }).notNullable()
      table.index(['user_id', 'created_at'])
      table.index(['created_at'])
      table.index(['status'])
    })
    this.schema.raw(
      `alter table agents add constraint agents_status_check check (status in ('active', 'stopped', 'paused', 'error'))`
    )
  }

  async down() {
    this.schema.dropTable(this.tableName)
  }
}
