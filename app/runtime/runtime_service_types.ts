import type { FrameworkPlugin } from '#plugins/types'
import type { BootPriority, BootQueueOrder } from '#runtime/capacity/capacity_manager'
import type { SharedBook } from '#runtime/capacity/host_book'
import type { Phase } from '#runtime/boot_phases'
import type { ContainerDriver, ContainerInfo } from '#runtime/types'

/** Finds an installed framework plugin by name (the PluginRegistry fits). */
export interface FrameworkResolver {
  framework(name: string): FrameworkPlugin
}

export interface RuntimeServiceOptions {
  driver: ContainerDriver
  frameworks: FrameworkResolver
  /** `<storage>/agents`; the runtime keeps each agent's gateway token there. */
  agentsDir: string
  /** Default for waitUntilReady. Default 180 s (OpenClaw takes ~15 s on 2 cores). */
  readinessTimeoutMs?: number
  /** Longest wait for a chat reply (or a stream's first bytes). Default 300 s. */
  chatTimeoutMs?: number
  /**
   * Boot queue and memory budget (app/runtime/capacity), and the most an
   * agent's workspace may hold (files/workspace_quota); unlimited when
   * absent. Read at each use, so a change applies at once.
   */
  capacity?: {
    bootConcurrency: number
    memoryBudgetMb: number
    workspaceQuotaMb?: number
    /** The boot queue's order (capacity_manager.ts); fifo is the bench's baseline only. */
    bootQueue?: BootQueueOrder
    /** Most agents put to sleep for room at once (default 1). */
    roomSleeps?: number
    /** Most starts preparing their container at once (agent_starts.ts; 0: no limit). */
    preparesAtOnce?: number
  }
  /**
   * The capacity book the instances of this host share (host_book.ts);
   * absent, the boot queue and memory budget are this instance's alone.
   */
  capacityBook?: SharedBook
  /** The warm-up turn before a first checkpoint (see RuntimeService#warmUp). Default on; bench:wake turns it off to compare. */
  warmUpBeforeCheckpoint?: boolean
  log?: (
    level: 'info' | 'warn' | 'error',
    message: string,
    detail?: Record<string, unknown>
  ) => void
}

/**
 * What the agents area reports as `container` (CONTRACT.md): the runtime
 * knows all but `sleeping`, which is an `active` agent with no container
 * running (the agents area tells it from the stored status).
 */
export type ContainerView = 'running' | 'starting' | 'queued' | 'stopped' | 'error'

export interface StartOptions {
  waitReady?: boolean
  timeoutMs?: number
  signal?: AbortSignal
  /** The run id planRun answered: the container takes it; no boot once another run is wanted. */
  runId?: string
  /**
   * Its place in the boot queue: interactive (default: a message, an
   * owner's start) or background (a new agent booted ahead of time,
   * recovery), which waits for every interactive start and never puts an
   * agent to sleep for room.
   */
  priority?: BootPriority
  /** When the start was asked for (ms): its arrival in the boot queue's order. Default: now. */
  askedAt?: number
}

/** What the API reports of an agent's container, in one look (RuntimeService.snapshot). */
export interface RuntimeSnapshot {
  /** The driver's view, with the id of a run scheduled but not yet up. */
  info: ContainerInfo
  view: ContainerView
  /** Its 1-based place in the boot queue while queued, else null. */
  queuePosition: number | null
  /** The boot phase its holder saw it enter last. */
  phase?: { phase: Phase; since: string }
}
