import env from '#start/env'
import { appUrl } from '#config/app'
import type { AgentRuntimeSpec } from '#runtime/types'
import type Agent from '#agents/models/agent'
import { proxyTokenOf } from '#agents/services/agent_tokens'
import { decryptSecrets } from '#agents/services/config_secrets'

/** The hosted model's name: `local-dev` without MODEL_API_URL (CONTRACT.md). */
export function hostedModelName(): string {
  return env.get('MODEL_API_URL') ? (env.get('MODEL_NAME') ?? 'local-dev') : 'local-dev'
}

/** The service's model proxy as the agent's container reaches it. */
export function modelProxyFor(agent: Agent): AgentRuntimeSpec['modelProxy'] {
  return { baseUrl: `${appUrl}/v1`, token: proxyTokenOf(agent), model: hostedModelName() }
}

/** What the runtime needs to start or reconfigure this agent (clear config: never log it). */
export function runtimeSpecFor(agent: Agent): AgentRuntimeSpec {
  return {
    agentId: agent.id,
    framework: agent.framework,
    config: decryptSecrets(agent.config),
    modelProxy: modelProxyFor(agent),
  }
}
