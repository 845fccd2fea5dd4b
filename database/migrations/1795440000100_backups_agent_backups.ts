import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Agent backups (docs/backups.md): one row per archive stored under
 * `<STORAGE_DIR>/backups/<agent id>/<backup id>.tar.gz`. The row is written
 * once the archive is complete; the files of a deleted agent are removed by
 * the retention job (the rows go with the agent).
 */
export default class extends BaseSchema {
  async up() {
    this.schema.createTable('agent_backups', (table) => {
      table.uuid('id').primary()
      table.uuid('agent_id').notNullable().references('id').inTable('agents').onDelete('CASCADE')
      table.string('kind', 16).notNullable()
      table.bigInteger('size').notNullable()
      table.string('sha256', 64).notNullable()
      table.boolean('include_secrets').notNullable().defaultTo(false)
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.index(['agent_id', 'created_at'])
    })
    this.schema.raw(
      `alter table agent_backups add constraint agent_backups_kind_check check (kind in ('manual', 'daily', 'pre-restore'))`
    )
  }

  async down() {
    this.schema.dropTable('agent_backups')
  }
}
