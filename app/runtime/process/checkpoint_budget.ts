import { readdir, statfs } from 'node:fs/promises'
import { agentPaths } from '#runtime/agent_paths'
import { AgentCheckpoint } from '#runtime/process/checkpoint'

export interface CheckpointBudgetOptions {
  /** `<storage>/agents`: one folder per agent, each checkpoint in its own. */
  agentsDir: string
  /**
   * Disk all checkpoints may take together (AGENT_CHECKPOINT_DISK_MB);
   * default half the free space of the agents folder at the first sleep.
   */
  checkpointDiskMb?: number
  log: (message: string) => void
}

/**
 * The disk sleeping agents' checkpoints take together: a sleep checkpoints
 * only where the disk holds it, and the oldest checkpoints make room for
 * newer ones (docs/runtime.md "Sleep and wake").
 */
export class CheckpointBudget {
  /** Bytes all agents' checkpoints may take together (set at the first sleep). */
  #checkpointBudget?: number

  constructor(private readonly options: CheckpointBudgetOptions) {}

  /** The agents' checkpoints on disk, oldest first. */
  async #checkpointsOnDisk(): Promise<
    Array<{ agentId: string; store: AgentCheckpoint; bytes: number }>
  > {
    let names: string[] = []
    try {
      names = await readdir(this.options.agentsDir)
    } catch {
      return []
    }
    const found = []
    for (const agentId of names) {
      let store
      try {
        store = new AgentCheckpoint(agentPaths(this.options.agentsDir, agentId).checkpoint)
      } catch {
        continue
      }
      const meta = await store.meta()
      if (meta) found.push({ agentId, store, bytes: meta.bytes, createdAt: meta.createdAt })
    }
    return found.sort((a, b) => a.createdAt.localeCompare(b.createdAt))
  }

  /**
   * True when the disk holds a checkpoint of `bytes` (written uncompressed
   * first) and still keeps a tenth of itself free.
   */
  async diskHolds(bytes: number): Promise<boolean> {
    const disk = await statfs(this.options.agentsDir)
    const free = disk.bavail * disk.bsize
    // Unset: half of what was free when the first agent slept (docs/runtime.md).
    this.#checkpointBudget ??= this.options.checkpointDiskMb
      ? this.options.checkpointDiskMb * 1024 * 1024
      : free / 2
    return free - bytes >= (disk.blocks * disk.bsize) / 10
  }

  /**
   * After `newest` was checkpointed: while all checkpoints together exceed
   * their budget, the oldest of other agents go first (those agents will
   * wake by booting), and the newest itself when it alone does not fit.
   * `locks`: the driver's per-agent operations, which a discard joins.
   */
  async keepWithinBudget(
    newest: string,
    locks: {
      busy(agentId: string): boolean
      exclusive<T>(agentId: string, work: () => Promise<T>): Promise<T>
    }
  ): Promise<void> {
    const budget = this.#checkpointBudget ?? Number.POSITIVE_INFINITY
    const onDisk = await this.#checkpointsOnDisk()
    let used = onDisk.reduce((sum, entry) => sum + entry.bytes, 0)
    const order = [
      ...onDisk.filter((entry) => entry.agentId !== newest),
      ...onDisk.filter((entry) => entry.agentId === newest),
    ]
    for (const entry of order) {
      if (used <= budget) break
      // One that is being restored or taken right now is left alone.
      if (entry.agentId !== newest && locks.busy(entry.agentId)) continue
      await locks.exclusive(entry.agentId, () => entry.store.discard())
      used -= entry.bytes
      this.options.log(
        entry.agentId === newest
          ? `agent ${entry.agentId}: its checkpoint does not fit the checkpoint budget; it will wake by booting`
          : `agent ${entry.agentId}: its checkpoint made room for a newer one; it will wake by booting`
      )
    }
  }
}
