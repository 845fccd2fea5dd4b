import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Plans paid on chain:
 * - `wallet_nonces`: single-use challenges a wallet signs to be linked to an
 *   account (10 minutes); a wallet address links to one account only.
 * - `addon_subscriptions`: one row per purchased agent pack, with its expiry;
 *   `lapsed_at` is set once by the lapse job (so it notifies once).
 * - `founding_slots`: one row per Founding Member slot sold, numbered from 1;
 *   the primary key on the number and the unique account make a slot
 *   impossible to sell twice, whatever the code does.
 */
export default class extends BaseSchema {
  async up() {
    this.schema.createTable('wallet_nonces', (table) => {
      table.uuid('id').primary()
      table.uuid('user_id').notNullable().references('id').inTable('users').onDelete('CASCADE')
      table.string('nonce', 64).notNullable().unique()
      table.text('message').notNullable()
      table.timestamp('expires_at', { useTz: true }).notNullable()
      table.timestamp('used_at', { useTz: true }).nullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.index(['user_id', 'created_at'])
    })
    this.schema.raw(
      'create unique index users_wallet_address_unique on users (wallet_address) where wallet_address is not null'
    )

    this.schema.createTable('addon_subscriptions', (table) => {
      table.uuid('id').primary()
      table.uuid('user_id').notNullable().references('id').inTable('users').onDelete('CASCADE')
      table.string('addon_key', 64).notNullable()
      table.integer('extra_agents').notNullable()
      table
        .uuid('payment_id')
        .nullable()
        .unique()
        .references('id')
        .inTable('payments')
        .onDelete('SET NULL')
      table.timestamp('starts_at', { useTz: true }).notNullable()
      table.timestamp('expires_at', { useTz: true }).notNullable()
      table.timestamp('lapsed_at', { useTz: true }).nullable()
      table.timestamp('created_at', { useTz: true }).notNullable()
      table.timestamp('updated_at', { useTz: true }).notNullable()
      table.index(['user_id', 'expires_at'])
    })
    this.schema.raw(
      'create index addon_subscriptions_pending_lapse on addon_subscriptions (expires_at) where lapsed_at is null'
    )

    this.schema.createTable('founding_slots', (table) => {
      table.smallint('slot').primary()
      table
        .uuid('user_id')
        .nullable()
        .unique()
        .references('id')
        .inTable('users')
        .onDelete('SET NULL')
      table
        .uuid('payment_id')
        .nullable()
        .unique()
        .references('id')
        .inTable('payments')
        .onDelete('SET NULL')
      table.timestamp('created_at', { useTz: true }).notNullable()
    })
    this.schema.raw(
      'alter table founding_slots add constraint founding_slots_slot_check check (slot >= 1)'
    )
  }

  async down() {
    this.schema.dropTable('founding_slots')
    this.schema.dropTable('addon_subscriptions')
    this.schema.raw('drop index if exists users_wallet_address_unique')
    this.schema.dropTable('wallet_nonces')
  }
}
