import { BaseSchema } from '@adonisjs/lucid/schema'

/** Support tickets opened by account holders; staff replies come later. */
export default class extends BaseSchema {
  protected tableName = 'support_tickets'

  async up() {
    this.schema.createTable(this.tableName, (table) => {
      table.uuid('id').primary()
      table.uuid('user_id').notNullable().references('id').inTable('users').onDelete('CASCADE')
      table.string('subject', 200).notNullable()
      table.text('body').notNullable()
      table.string('category', 16).notNullable()
      table.string('status', 16).notNullable().defaultTo('open')
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.timestamp('updated_at', { useTz: true }).notNullable()
      table.index(['user_id', 'created_at'])
    })
  }

  async down() {
    this.schema.dropTable(this.tableName)
  }
}
