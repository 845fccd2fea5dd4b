import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Stored conversation of each agent: the newest 200 messages of the last
 * 30 days are kept (pruned on insert and by a periodic job). `seq` orders
 * messages written in the same millisecond.
 *
 * `chat_daily_counts` counts processed messages per agent and UTC day, in
 * the same transaction as the store; analytics read it (the messages table
 * is pruned, the counters are not).
 */
export default class extends BaseSchema {
  async up() {
    this.schema.createTable('chat_messages', (table) => {
      table.uuid('id').primary()
      table.bigIncrements('seq', { primaryKey: false })
      table.uuid('agent_id').notNullable().references('id').inTable('agents').onDelete('CASCADE')
      table.string('role', 16).notNullable()
      table.text('content').notNullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.index(['agent_id', 'created_at', 'seq'])
      // The 30-day prune deletes by age across agents.
      table.index(['created_at'])
    })
    this.schema.raw(
      `alter table chat_messages add constraint chat_messages_role_check check (role in ('user', 'assistant'))`
    )

    this.schema.createTable('chat_daily_counts', (table) => {
      table.uuid('agent_id').notNullable().references('id').inTable('agents').onDelete('CASCADE')
      table.date('day').notNullable()
      table.integer('messages').notNullable().defaultTo(0)
      table.primary(['agent_id', 'day'])
      // The pruning job visits agents active in the last days.
      table.index(['day'])
    })
  }

  async down() {
    this.schema.dropTable('chat_daily_counts')
    this.schema.dropTable('chat_messages')
  }
}
