import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Credentials stored hashed: API keys (columns as the auth package's access
 * tokens provider expects), rotating refresh tokens grouped in families,
 * single-use e-mail verification tokens.
 */
export default class extends BaseSchema {
  async up() {
    this.schema.createTable('api_keys', (table) => {
      table.uuid('id').primary().defaultTo(this.raw('gen_random_uuid()'))
      table.uuid('tokenable_id').notNullable().references('id').inTable('users').onDelete('CASCADE')
      table.string('type', 32).notNullable()
      table.string('name', 100).nullable()
      table.string('hash', 128).notNullable()
      table.text('abilities').notNullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.timestamp('updated_at', { useTz: true }).notNullable()
      table.timestamp('last_used_at', { useTz: true }).nullable()
      table.timestamp('expires_at', { useTz: true }).nullable()
      table.index(['tokenable_id'])
    })

    this.schema.createTable('refresh_tokens', (table) => {
      table.uuid('id').primary()
      table.uuid('user_id').notNullable().references('id').inTable('users').onDelete('CASCADE')
      table.uuid('family_id').notNullable().index()
      table.string('token_hash', 64).notNullable().unique()
      table.timestamp('expires_at', { useTz: true }).notNullable()
      table.timestamp('revoked_at', { useTz: true }).nullable()
      table.uuid('replaced_by_id').nullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.index(['user_id'])
    })

    this.schema.createTable('email_verification_tokens', (table) => {
      table.uuid('id').primary()
      table.uuid('user_id').notNullable().references('id').inTable('users').onDelete('CASCADE')
      table.string('token_hash', 64).notNullable().unique()
      table.timestamp('expires_at', { useTz: true }).notNullable()
      table.timestamp('used_at', { useTz: true }).nullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.index(['user_id'])
    })
  }

  async down() {
    this.schema.dropTable('email_verification_tokens')
    this.schema.dropTable('refresh_tokens')
    this.schema.dropTable('api_keys')
  }
}
