import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * The console: staff two-factor sign-in, the audit trail of staff actions,
 * threaded support replies with assignment, and the indexes its searches
 * use (prefix search on lower-cased text with text_pattern_ops).
 */
export default class extends BaseSchema {
  async up() {
    this.schema.alterTable('users', (table) => {
      /** Base32 TOTP secret, encrypted with APP_KEY. */
      table.text('totp_secret_encrypted').nullable()
      table.timestamp('totp_enabled_at', { useTz: true }).nullable()
      /** SHA-256 hashes of the unused recovery codes. */
      table.jsonb('totp_recovery_hashes').notNullable().defaultTo('[]')
    })

    this.schema.alterTable('support_tickets', (table) => {
      table.uuid('assigned_to_id').nullable().references('id').inTable('users').onDelete('SET NULL')
      table.index(['status', 'created_at'])
    })
    this.schema.raw(`update support_tickets set status = 'waiting' where status = 'pending'`)

    this.schema.createTable('support_ticket_replies', (table) => {
      table.uuid('id').primary()
      table
        .uuid('ticket_id')
        .notNullable()
        .references('id')
        .inTable('support_tickets')
        .onDelete('CASCADE')
      table.uuid('author_id').nullable().references('id').inTable('users').onDelete('SET NULL')
      /** `staff` or `holder`: who wrote it, whatever the author's role is today. */
      table.string('author_kind', 8).notNullable()
      table.text('body').notNullable()
      /** Staff-only note, never shown to the account holder. */
      table.boolean('internal').notNullable().defaultTo(false)
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.index(['ticket_id', 'created_at'])
    })

    this.schema.createTable('audit_entries', (table) => {
      table.bigIncrements('id')
      table.uuid('actor_id').nullable().references('id').inTable('users').onDelete('SET NULL')
      table.string('actor_email', 254).notNullable()
      table.string('action', 64).notNullable()
      table.string('target_type', 32).notNullable()
      table.string('target_id', 64).nullable()
      table.jsonb('before').nullable()
      table.jsonb('after').nullable()
      table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(this.now())
      table.index(['created_at'])
      table.index(['target_type', 'target_id'])
    })

    this.schema.raw(
      'create index users_email_prefix on users (lower(email) text_pattern_ops, created_at)'
    )
    this.schema.raw(
      'create index users_username_prefix on users (lower(username) text_pattern_ops)'
    )
    this.schema.raw('create index users_created_at on users (created_at)')
    this.schema.raw('create index agents_name_prefix on agents (lower(name) text_pattern_ops)')
    this.schema.raw('create index agents_slug_prefix on agents (slug text_pattern_ops)')
    this.schema.raw('create index payments_created_at on payments (created_at)')
  }

  async down() {
    for (const index of [
      'payments_created_at',
      'agents_slug_prefix',
      'agents_name_prefix',
      'users_created_at',
      'users_username_prefix',
      'users_email_prefix',
    ]) {
      this.schema.raw(`drop index if exists ${index}`)
    }
    this.schema.dropTable('audit_entries')
    this.schema.dropTable('support_ticket_replies')
    this.schema.alterTable('support_tickets', (table) => {
      table.dropColumn('assigned_to_id')
    })
    this.schema.alterTable('users', (table) => {
      table.dropColumn('totp_secret_encrypted')
      table.dropColumn('totp_enabled_at')
      table.dropColumn('totp_recovery_hashes')
    })
  }
}
