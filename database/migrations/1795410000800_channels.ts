import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Messaging channels (docs/channels.md). `agent_channels`: one row per
 * agent and channel that is configured or paired; the instance holding its
 * connection is `holder` until `lease_expires_at`. `channel_messages`:
 * every inbound message once (its channel-side id is the key, so no
 * message is answered twice) with the reply, which is also the history of
 * each conversation.
 */
export default class extends BaseSchema {
  async up() {
    this.schema.createTable('agent_channels', (table) => {
      table.uuid('id').primary().defaultTo(this.raw('gen_random_uuid()'))
      table.uuid('agent_id').notNullable().references('id').inTable('agents').onDelete('CASCADE')
      table.string('channel', 40).notNullable()
      /** sha256 of the credentials: a change reconnects, and lifts a halt. */
      table.string('fingerprint', 64).notNullable()
      table.string('state', 20).notNullable().defaultTo('connecting')
      table.string('last_error', 500).nullable()
      /** Refused credentials: not retried until the fingerprint changes. */
      table.boolean('halted').notNullable().defaultTo(false)
      table.jsonb('identity').notNullable().defaultTo('{}')
      table.text('qr_code').nullable()
      table.text('qr_raw').nullable()
      table.timestamp('qr_expires_at', { useTz: true }).nullable()
      /** Connector state (session keys, cursors), encrypted. */
      table.text('session_state').nullable()
      /** Secret part of the webhook URL, encrypted (channels with pushed updates). */
      table.text('webhook_secret').nullable()
      table.string('holder', 200).nullable()
      table.timestamp('lease_expires_at', { useTz: true }).nullable()
      table.integer('failures').notNullable().defaultTo(0)
      table.timestamp('retry_at', { useTz: true }).nullable()
      table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(this.now())
      table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(this.now())
      table.unique(['agent_id', 'channel'])
    })
    this.schema.createTable('channel_messages', (table) => {
      table.uuid('agent_id').notNullable().references('id').inTable('agents').onDelete('CASCADE')
      table.string('channel', 40).notNullable()
      table.string('message_id', 200).notNullable()
      table.string('conversation_id', 200).notNullable()
      table.string('sender_id', 200).notNullable()
      table.text('text').notNullable()
      table.text('reply').nullable()
      table.string('outcome', 20).notNullable().defaultTo('pending')
      table.timestamp('received_at', { useTz: true }).notNullable().defaultTo(this.now())
      table.primary(['agent_id', 'channel', 'message_id'])
      table.index(['agent_id', 'channel', 'conversation_id', 'received_at'])
    })
    this.schema.alterTable('agents', (table) => {
      /** Connected channel names (agent detail `integrations`), kept by the channel state writer. */
      table.jsonb('integrations').notNullable().defaultTo('[]')
    })
  }

  async down() {
    this.schema.alterTable('agents', (table) => table.dropColumn('integrations'))
    this.schema.dropTable('channel_messages')
    this.schema.dropTable('agent_channels')
  }
}
