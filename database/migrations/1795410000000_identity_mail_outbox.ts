import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Outgoing mail, durable: a message is written here first and delivered
 * from here, so an SMTP outage or a restart delays mail instead of losing
 * it. The body is encrypted (it may hold a single-use link) and dropped
 * once delivered.
 */
export default class extends BaseSchema {
  protected tableName = 'mail_outbox'

  async up() {
    this.schema.createTable(this.tableName, (table) => {
      table.uuid('id').primary().defaultTo(this.raw('gen_random_uuid()'))
      table.string('recipient', 320).notNullable()
      table.string('subject', 300).notNullable()
      table.text('body_encrypted').nullable()
      table.integer('attempts').notNullable().defaultTo(0)
      table.timestamp('next_attempt_at', { useTz: true }).notNullable().defaultTo(this.now())
      table.timestamp('claimed_until', { useTz: true }).nullable()
      table.timestamp('sent_at', { useTz: true }).nullable()
      table.timestamp('failed_at', { useTz: true }).nullable()
      table.string('last_error', 500).nullable()
      table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(this.now())
    })
    // Only undelivered mail is ever scanned.
    this.schema.raw(
      `create index mail_outbox_due on mail_outbox (next_attempt_at)
       where sent_at is null and failed_at is null`
    )
  }

  async down() {
    this.schema.dropTable(this.tableName)
  }
}
