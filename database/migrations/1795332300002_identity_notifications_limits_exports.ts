import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * In-app notifications, the limiter's database store (used when REDIS_URL is
 * unset) and data export jobs (at most one in progress per user).
 */
export default class extends BaseSchema {
  async up() {
    this.schema.createTable('notifications', (table) => {
      table.uuid('id').primary()
      table.uuid('user_id').notNullable().references('id').inTable('users').onDelete('CASCADE')
      table.string('type', 64).notNullable()
      table.string('title', 200).notNullable()
      table.text('body').notNullable()
      table.timestamp('read_at', { useTz: true }).nullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.index(['user_id', 'read_at', 'created_at'])
    })

    // Column layout required by rate-limiter-flexible's PostgreSQL store.
    this.schema.createTable('rate_limits', (table) => {
      table.string('key', 255).primary()
      table.integer('points').notNullable().defaultTo(0)
      table.bigint('expire').nullable()
    })

    this.schema.createTable('data_exports', (table) => {
      table.uuid('id').primary()
      table.uuid('user_id').notNullable().references('id').inTable('users').onDelete('CASCADE')
      table.string('status', 16).notNullable()
      table.string('file_name', 255).nullable()
      table.bigint('size_bytes').nullable()
      table.text('error').nullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.timestamp('completed_at', { useTz: true }).nullable()
      table.timestamp('expires_at', { useTz: true }).nullable()
      table.index(['user_id', 'created_at'])
    })
    this.schema.raw(
      `create unique index data_exports_one_processing on data_exports (user_id) where status = 'processing'`
    )
  }

  async down() {
    this.schema.dropTable('data_exports')
    this.schema.dropTable('rate_limits')
    this.schema.dropTable('notifications')
  }
}
