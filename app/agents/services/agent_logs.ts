import app from '@adonisjs/core/services/app'
import { AgentNotRunningException } from '#core/exceptions/api_exceptions'
import type Agent from '#agents/models/agent'
import { proxyTokenOf, webhookTokenOf } from '#agents/services/agent_tokens'
import { MASK, decryptSecrets, secretValues } from '#agents/services/config_secrets'

/** Largest `tail` answered. */
export const LOG_TAIL_MAX = 10_000

/**
 * Replaces the agent's secrets (config secrets, model-proxy and webhook
 * tokens) by `***` in log text. The runtime redacts what it was started
 * with; this also covers logs read after a service restart or a config
 * change, and secrets shorter than the runtime's minimum.
 */
export function logRedactor(agent: Agent): (line: string) => string {
  const secrets = [
    ...secretValues(decryptSecrets(agent.config)),
    proxyTokenOf(agent),
    webhookTokenOf(agent),
  ]
    .filter((secret) => secret.length >= 4)
    .sort((a, b) => b.length - a.length)
  return (line) => {
    let clean = line
    for (const secret of secrets) clean = clean.replaceAll(secret, MASK)
    return clean
  }
}

/** The last `tail` lines as plain text (also for a stopped agent). */
export async function tailLogs(agent: Agent, tail: number): Promise<string> {
  const runtime = await app.container.make('runtime')
  const text = await runtime.logs(agent.id, { tail })
  const redact = logRedactor(agent)
  return text
    .split('\n')
    .map((line) => redact(line))
    .join('\n')
}

/**
 * Live lines (after the last `tail`), redacted. 409 only when the owner has
 * it off (stopped, paused, error): a queued, booting or sleeping container
 * streams once it runs.
 */
export async function followLogs(
  agent: Agent,
  options: { tail: number; signal: AbortSignal }
): Promise<AsyncIterable<string>> {
  if (agent.status !== 'active') throw new AgentNotRunningException()
  const runtime = await app.container.make('runtime')
  const lines = await runtime.followLogs(agent.id, options)
  const redact = logRedactor(agent)
  return (async function* () {
    for await (const line of lines) yield redact(line)
  })()
}
