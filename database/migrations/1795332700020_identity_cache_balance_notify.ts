import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * A users row whose only change is `ai_credits_balance` (a credit hold, a
 * settlement, a ledger entry) is announced as `b:<id>:<balance>:<txid>`
 * instead of `u:<id>`: each instance updates the balance of its cached row
 * in place (NOTIFYs arrive in commit order) rather than evicting it, so the
 * next request of a paying account does not reload the user. `txid` lets
 * the instance that made the change tell whether this announcement already
 * reached it (see auth_cache `balanceChanged`). Any other change, and any
 * deletion, still evicts.
 */
export default class extends BaseSchema {
  async up() {
    this.schema.raw(`
      create or replace function identity_cache_notify() returns trigger as $$
      begin
        if tg_table_name = 'users' and tg_op = 'UPDATE'
           and (to_jsonb(new) - 'ai_credits_balance') = (to_jsonb(old) - 'ai_credits_balance') then
          if new.ai_credits_balance is distinct from old.ai_credits_balance then
            perform pg_notify(
              'identity_cache',
              'b:' || new.id::text || ':' || new.ai_credits_balance::text || ':'
                || txid_current()::text
            );
          end if;
          return null;
        end if;
        perform pg_notify(
          'identity_cache',
          (case when tg_table_name = 'users' then 'u:' else 'k:' end) || old.id::text
        );
        return null;
      end
      $$ language plpgsql
    `)
  }

  async down() {
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
  }
}
