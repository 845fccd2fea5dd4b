import type { RestartPolicy } from '#runtime/process/prepared_launch'

/**
 * An agent's crash restarts: each after a delay that doubles with every
 * crash in a row (a run long enough resets the count), none once too many
 * crashes came in a row (the supervisor then gives up: `error`).
 */
export class CrashRestarts {
  #consecutiveCrashes = 0
  #restartTimer?: NodeJS.Timeout

  constructor(private readonly policy: RestartPolicy) {}

  /** An explicit start: a fresh count of crashes. */
  reset() {
    this.#consecutiveCrashes = 0
  }

  /**
   * Counts the crash of a run that started at `startedAt`: the delay before
   * its restart, or undefined when it is given up on.
   */
  next(startedAt: number): number | undefined {
    const restart = this.policy
    if (Date.now() - startedAt >= restart.stableAfterMs) this.#consecutiveCrashes = 0
    this.#consecutiveCrashes++
    if (this.#consecutiveCrashes > restart.maxConsecutiveRestarts) return undefined
    return Math.min(restart.baseDelayMs * 2 ** (this.#consecutiveCrashes - 1), restart.maxDelayMs)
  }

  /** Runs `restart` after `delayMs`, unless cancelled meanwhile. */
  schedule(delayMs: number, restart: () => void) {
    this.#restartTimer = setTimeout(() => {
      this.#restartTimer = undefined
      restart()
    }, delayMs)
    this.#restartTimer.unref()
  }

  /** The restart scheduled, if any, does not happen. */
  cancel() {
    if (this.#restartTimer) clearTimeout(this.#restartTimer)
    this.#restartTimer = undefined
  }
}
