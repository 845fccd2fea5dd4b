import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Scheduled tasks of agents and their runs (docs/schedules.md). A due task
 * is claimed by one instance (`claimed_by`, `claimed_until`) so that
 * instances sharing the database never run it twice; a dead instance's
 * claim lapses.
 */
export default class extends BaseSchema {
  async up() {
    this.schema.createTable('agent_schedules', (table) => {
      table.uuid('id').primary().defaultTo(this.raw('gen_random_uuid()'))
      table.uuid('agent_id').notNullable().references('id').inTable('agents').onDelete('CASCADE')
      table.string('name', 100).notNullable()
      table.string('cron', 100).notNullable()
      table.string('timezone', 64).notNullable().defaultTo('UTC')
      table.text('message').notNullable()
      table.boolean('enabled').notNullable().defaultTo(true)
      table.timestamp('next_run_at', { useTz: true }).nullable()
      table.timestamp('last_run_at', { useTz: true }).nullable()
      table.string('claimed_by', 200).nullable()
      table.timestamp('claimed_until', { useTz: true }).nullable()
      table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(this.now())
      table.index(['agent_id'])
    })
    this.schema.raw(
      'create index agent_schedules_due on agent_schedules (next_run_at) where enabled'
    )
    this.schema.createTable('agent_schedule_runs', (table) => {
      table.uuid('id').primary().defaultTo(this.raw('gen_random_uuid()'))
      table
        .uuid('schedule_id')
        .notNullable()
        .references('id')
        .inTable('agent_schedules')
        .onDelete('CASCADE')
      table.timestamp('started_at', { useTz: true }).notNullable()
      table.timestamp('finished_at', { useTz: true }).notNullable()
      table.string('status', 10).notNullable()
      table.string('error', 500).nullable()
      table.string('reply_excerpt', 300).nullable()
      table.index(['schedule_id', 'started_at'])
    })
  }

  async down() {
    this.schema.dropTable('agent_schedule_runs')
    this.schema.dropTable('agent_schedules')
  }
}
