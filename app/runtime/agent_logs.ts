import { setTimeout as sleep } from 'node:timers/promises'
import type { ContainerDriver } from '#runtime/types'

/** How often a log stream of a container not yet running looks for it to run. */
const LOG_FOLLOW_POLL_MS = 1000
/** Most lines a log stream catches up on when the container it waited for starts. */
const LOG_CATCH_UP_LINES = 1000

/** Config keys whose values are secrets (CONTRACT.md): they never reach a log answer. */
const SECRET_KEY = /(key|token|secret|password)$/i

function secretValues(value: unknown, key = '', into = new Set<string>()): Set<string> {
  if (typeof value === 'string') {
    if (SECRET_KEY.test(key) && value.length >= 6) into.add(value)
  } else if (Array.isArray(value)) {
    for (const item of value) secretValues(item, key, into)
  } else if (value && typeof value === 'object') {
    for (const [child, item] of Object.entries(value)) secretValues(item, child, into)
  }
  return into
}

/** Each agent's secrets (its config's, its tokens), replaced by `***` in what its logs answer. */
export class LogRedaction {
  readonly #secrets = new Map<string, Set<string>>()

  /** The agent's secrets: the values of its config's secret keys, and `tokens`. */
  remember(agentId: string, config: unknown, tokens: string[]) {
    this.#secrets.set(agentId, secretValues(config, '', new Set(tokens)))
  }

  forget(agentId: string) {
    this.#secrets.delete(agentId)
  }

  /** True when this instance was told the agent's secrets (it prepared the agent's launch). */
  knows(agentId: string): boolean {
    return this.#secrets.has(agentId)
  }

  redact(agentId: string, line: string): string {
    let clean = line
    for (const secret of this.#secrets.get(agentId) ?? []) clean = clean.replaceAll(secret, '***')
    return clean
  }
}

/**
 * The agent's live output line by line (`redact`ed), after the last `tail`
 * lines (default 0), until `signal` aborts. An agent not running yet
 * (queued, starting, asleep) gets its stored tail now, then its live lines
 * once its container runs.
 */
export async function followAgentLogs(
  driver: ContainerDriver,
  agentId: string,
  options: { tail?: number; signal?: AbortSignal },
  redact: (line: string) => string
): Promise<AsyncIterable<string>> {
  const info = await driver.inspect(agentId)
  if (info.state === 'running') {
    const lines = driver.followLogs(agentId, options)
    return (async function* () {
      for await (const line of lines) yield redact(line)
    })()
  }
  // Queued, starting or asleep (the owner wants it on; CONTRACT: no 409):
  // the stored tail now, then the live lines once its container runs.
  const stored = await driver
    .logs(agentId, Math.max(0, options.tail ?? 0))
    .catch((): string[] => [])
  const signal = options.signal
  return (async function* () {
    for (const line of stored) yield redact(line)
    while (!signal?.aborted) {
      await sleep(LOG_FOLLOW_POLL_MS, undefined, { signal }).catch(() => undefined)
      if (signal?.aborted) return
      const now = await driver.inspect(agentId)
      if (now.state === 'running') break
    }
    // Catch up on what it wrote between its start and this look (lines carry
    // timestamps, so the last line seen marks where the stored tail ended).
    const recent = await driver.logs(agentId, LOG_CATCH_UP_LINES).catch((): string[] => [])
    const lastSeen = stored.length ? recent.lastIndexOf(stored[stored.length - 1]) : -1
    const missed = recent.length - lastSeen - 1
    for await (const line of driver.followLogs(agentId, { tail: missed, signal })) {
      yield redact(line)
    }
  })()
}
