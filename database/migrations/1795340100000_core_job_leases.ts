import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Who runs each periodic job right now: a lease with its holder (instance
 * id) and expiry, claimed with one statement and renewed while the job
 * runs. Unlike a transaction-scoped advisory lock it holds no database
 * connection for the length of the run.
 */
export default class extends BaseSchema {
  protected tableName = 'periodic_job_leases'

  async up() {
    this.schema.createTable(this.tableName, (table) => {
      table.string('name', 100).primary()
      table.string('holder', 200).notNullable()
      table.timestamp('started_at', { useTz: true }).notNullable()
      table.timestamp('expires_at', { useTz: true }).notNullable()
    })
  }

  async down() {
    this.schema.dropTable(this.tableName)
  }
}
