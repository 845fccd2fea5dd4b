import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * One capacity book per host (app/runtime/capacity/host_book.ts): every
 * agent an instance of this host admitted (booting or running) or holds in
 * its boot queue, with the memory it reserves, so that all instances on one
 * host share one memory budget, one set of boot slots and one queue order.
 * Unlogged: it describes running processes, which a database crash does
 * not outlive either (each instance writes its own again as it goes).
 */
export default class extends BaseSchema {
  async up() {
    this.schema.raw(`create unlogged table runtime_capacity (
      agent_id text primary key,
      host text not null,
      instance text not null,
      reserved_mb integer not null,
      booting boolean not null default false,
      queued boolean not null default false,
      interactive boolean not null default true,
      resumes boolean not null default false,
      arrived_at timestamptz not null default now(),
      last_active_at timestamptz not null default now()
    )`)
    this.schema.raw('create index runtime_capacity_host on runtime_capacity (host)')
  }

  async down() {
    this.schema.raw('drop table if exists runtime_capacity')
  }
}
