import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Knowledge files of agents (docs/knowledge.md) and their chunks, indexed
 * for full-text search (english configuration, GIN) so that a chat gets
 * the passages relevant to its question.
 */
export default class extends BaseSchema {
  async up() {
    this.schema.createTable('knowledge_files', (table) => {
      table.uuid('id').primary().defaultTo(this.raw('gen_random_uuid()'))
      table.uuid('agent_id').notNullable().references('id').inTable('agents').onDelete('CASCADE')
      table.string('filename', 255).notNullable()
      table.text('content').notNullable()
      table.integer('size').notNullable()
      table.timestamp('uploaded_at', { useTz: true }).notNullable().defaultTo(this.now())
      table.unique(['agent_id', 'filename'])
    })
    this.schema.createTable('knowledge_chunks', (table) => {
      table.bigIncrements('id')
      table
        .uuid('file_id')
        .notNullable()
        .references('id')
        .inTable('knowledge_files')
        .onDelete('CASCADE')
      table.uuid('agent_id').notNullable()
      table.integer('ordinal').notNullable()
      table.text('content').notNullable()
    })
    this.schema.raw(
      `alter table knowledge_chunks add column tsv tsvector
         generated always as (to_tsvector('english', content)) stored`
    )
    this.schema.raw('create index knowledge_chunks_tsv on knowledge_chunks using gin (tsv)')
    this.schema.raw('create index knowledge_chunks_agent on knowledge_chunks (agent_id)')
  }

  async down() {
    this.schema.dropTable('knowledge_chunks')
    this.schema.dropTable('knowledge_files')
  }
}
