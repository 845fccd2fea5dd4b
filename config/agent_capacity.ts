import { availableParallelism, totalmem } from 'node:os'
import env from '#start/env'

/**
 * How many agents this host boots and holds (app/runtime/capacity,
 * CONTRACT.md): AGENT_BOOT_CONCURRENCY (default: the number of cores),
 * AGENT_MEMORY_BUDGET_MB (default: host memory less a reserve for the
 * service and its database: a quarter of it, at least 2 GB and at most
 * 8 GB), AGENT_IDLE_SLEEP_SECS (default 900) and AGENT_WORKSPACE_QUOTA_MB
 * (default 1024). AGENT_BOOT_QUEUE=fifo restores the boot queue's earlier
 * first-come order: bench/density's baseline, not a setting to run with.
 * AGENT_ROOM_SLEEPS: most agents put to sleep for room at once (default 1;
 * more measured no faster on two cores, docs/runtime.md "Burst mode").
 * AGENT_PREPARES_AT_ONCE: most starts preparing their container at once
 * (default 8; 0, no limit, is bench/density's baseline).
 */
const hostMb = Math.floor(totalmem() / 1024 / 1024)
const reserveMb = Math.min(8192, Math.max(2048, Math.floor(hostMb / 4)))

function positive(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : fallback
}

/** A count of 0 or more as given, or undefined when unset. */
function wholeOrUndefined(value: number | undefined): number | undefined {
  return value === undefined ? undefined : Math.max(0, Math.floor(value))
}

const idleSleepMs = positive(env.get('AGENT_IDLE_SLEEP_SECS'), 900) * 1000

export const agentCapacityConfig = {
  bootConcurrency: Math.floor(positive(env.get('AGENT_BOOT_CONCURRENCY'), availableParallelism())),
  memoryBudgetMb: Math.floor(
    positive(env.get('AGENT_MEMORY_BUDGET_MB'), Math.max(512, hostMb - reserveMb))
  ),
  bootQueue: env.get('AGENT_BOOT_QUEUE') ?? 'fair',
  roomSleeps: Math.floor(positive(env.get('AGENT_ROOM_SLEEPS'), 1)),
  // Unset: AgentStarts' own default (app/runtime/agent_starts.ts).
  preparesAtOnce: wholeOrUndefined(env.get('AGENT_PREPARES_AT_ONCE')),
  idleSleepMs,
  /** How often idle agents are looked for: a quarter of the idle time, 1 to 30 s. */
  idleCheckEveryMs: Math.min(30_000, Math.max(1000, Math.floor(idleSleepMs / 4))),
  /** Most an agent's workspace folder may hold (app/runtime/files/workspace_quota.ts). */
  workspaceQuotaMb: positive(env.get('AGENT_WORKSPACE_QUOTA_MB'), 1024),
}
