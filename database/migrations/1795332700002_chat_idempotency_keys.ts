import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Idempotency-Key records of the chat routes: one per (scope, route, key),
 * where scope is the caller (user id, or the agent for the inbound
 * webhook). `state` is `pending` while the first request runs, `done` with
 * the stored answer after it. Expired rows are deleted by a job.
 */
export default class extends BaseSchema {
  protected tableName = 'chat_idempotency_keys'

  async up() {
    this.schema.createTable(this.tableName, (table) => {
      table.uuid('id').primary()
      table.string('scope', 80).notNullable()
      table.string('route', 40).notNullable()
      table.string('key', 255).notNullable()
      table.string('fingerprint', 64).notNullable()
      table.string('state', 16).notNullable()
      table.integer('status_code').nullable()
      table.jsonb('response').nullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.timestamp('expires_at', { useTz: true }).notNullable()
      table.unique(['scope', 'route', 'key'])
      table.index(['expires_at'])
    })
  }

  async down() {
    this.schema.dropTable(this.tableName)
  }
}
