import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Every change or deletion of a users or api_keys row is announced on the
 * `identity_cache` channel (after commit), whatever code path made it, so
 * each instance evicts it from its auth cache.
 */
export default class extends BaseSchema {
  async up() {
    this.schema.raw(`
      create or replace function identity_cache_notify() returns trigger as $$
      begin
        perform pg_notify(
          'identity_cache',
          (case when tg_table_name = 'users' then 'u:' else 'k:' end) || old.id::text
        );
        return null;
      end
      $$ language plpgsql
    `)
    this.schema.raw(`
      create trigger users_identity_cache after update or delete on users
      for each row execute function identity_cache_notify()
    `)
    this.schema.raw(`
      create trigger api_keys_identity_cache after update or delete on api_keys
      for each row execute function identity_cache_notify()
    `)
  }

  async down() {
    this.schema.raw('drop trigger if exists api_keys_identity_cache on api_keys')
    this.schema.raw('drop trigger if exists users_identity_cache on users')
    this.schema.raw('drop function if exists identity_cache_notify()')
  }
}
