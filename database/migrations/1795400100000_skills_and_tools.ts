import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Skills and tools (docs/skills.md, docs/tools.md): the catalogue skills an
 * agent has installed (re-rendered at every start), token scans and research
 * answers (stored; their rows per account and UTC day are the daily
 * allowance), and each agent's watched wallets.
 */
export default class extends BaseSchema {
  async up() {
    this.schema.alterTable('agents', (table) => {
      table.jsonb('installed_skills').notNullable().defaultTo('[]')
    })

    this.schema.createTable('token_scans', (table) => {
      table.uuid('id').primary()
      table.uuid('user_id').notNullable().references('id').inTable('users').onDelete('CASCADE')
      table.uuid('agent_id').nullable().references('id').inTable('agents').onDelete('SET NULL')
      table.string('mint_address', 64).notNullable()
      table.jsonb('result').nullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.index(['user_id', 'created_at'])
    })

    this.schema.createTable('research_tasks', (table) => {
      table.uuid('id').primary()
      table.uuid('user_id').notNullable().references('id').inTable('users').onDelete('CASCADE')
      table.uuid('agent_id').nullable().references('id').inTable('agents').onDelete('SET NULL')
      table.text('query').notNullable()
      table.text('result').nullable()
      table.string('model', 200).nullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.timestamp('completed_at', { useTz: true }).nullable()
      table.index(['user_id', 'created_at'])
    })

    this.schema.createTable('watched_wallets', (table) => {
      table.uuid('agent_id').notNullable().references('id').inTable('agents').onDelete('CASCADE')
      table.string('address', 64).notNullable()
      table.smallint('position').notNullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.primary(['agent_id', 'address'])
    })
  }

  async down() {
    this.schema.dropTable('watched_wallets')
    this.schema.dropTable('research_tasks')
    this.schema.dropTable('token_scans')
    this.schema.alterTable('agents', (table) => {
      table.dropColumn('installed_skills')
    })
  }
}
