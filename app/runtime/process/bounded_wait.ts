import { setTimeout as sleep } from 'node:timers/promises'

/**
 * Waits for `work`, at most `ms`. Unlike a race with a plain sleep, the timer
 * goes as soon as the work ends: a shutdown that raced its stops against a
 * 12 s grace kept its process alive, idle, for the rest of the grace (every
 * `node ace` command and test run that booted the runtime ended 12 s late).
 */
export async function waitAtMost(work: Promise<unknown>, ms: number): Promise<void> {
  const timer = new AbortController()
  try {
    await Promise.race([work, sleep(ms, undefined, { signal: timer.signal })])
  } finally {
    timer.abort()
  }
}
