import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * A `status_change` feed event names its transition: `from_state` and
 * `to_state` are stored statuses (active, stopped, paused, error) or
 * container states (queued, starting, running, sleeping, stopped, error);
 * null where unknown (from) or for other event types.
 */
export default class extends BaseSchema {
  protected tableName = 'agent_feed_events'

  async up() {
    this.schema.alterTable(this.tableName, (table) => {
      table.string('from_state', 16).nullable()
      table.string('to_state', 16).nullable()
    })
  }

  async down() {
    this.schema.alterTable(this.tableName, (table) => {
      table.dropColumn('from_state')
      table.dropColumn('to_state')
    })
  }
}
