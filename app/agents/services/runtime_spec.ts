import { appUrl } from '#config/app'
import { LOCAL_DEV_MODEL, modelProxyConfig } from '#config/model_proxy'
import { randomUUID } from 'node:crypto'
import type { FrameworkPlugin } from '#plugins/types'
import type { AgentRuntimeSpec } from '#runtime/types'
import type Agent from '#agents/models/agent'
import { PROXY_TOKEN_PREFIX, proxyTokenOf } from '#agents/services/agent_tokens'
import { validateConfig } from '#agents/services/agent_config'
import { randomToken } from '#identity/services/secure_tokens'
import { decryptSecrets } from '#agents/services/config_secrets'
import { skillFilesFor } from '#skills/services/skill_catalogue'

/**
 * The hosted model containers ask the proxy for: MODEL_NAME with an
 * upstream (MODEL_API_URL), else the built-in `local-dev` (CONTRACT.md).
 */
export function hostedModelName(): string {
  const { url, defaultModel } = modelProxyConfig.upstream
  return url && defaultModel ? defaultModel : LOCAL_DEV_MODEL
}

/** The service's model proxy as the agent's container reaches it. */
export function modelProxyFor(agent: Agent): AgentRuntimeSpec['modelProxy'] {
  return { baseUrl: `${appUrl}/v1`, token: proxyTokenOf(agent), model: hostedModelName() }
}

/** What the runtime needs to start or reconfigure this agent (clear config: never log it). */
export function runtimeSpecFor(agent: Agent): AgentRuntimeSpec {
  return {
    agentId: agent.id,
    ownerId: agent.userId,
    framework: agent.framework,
    config: decryptSecrets(agent.config),
    modelProxy: modelProxyFor(agent),
    skills: skillFilesFor(agent.installedSkills ?? []),
  }
}

/**
 * What a new agent of `plugin` created with the default config starts with:
 * the template built at service start boots from it. Its proxy token has a
 * real one's shape and is nobody's (the template replaces it anyway).
 */
export function newAgentSpec(plugin: FrameworkPlugin): AgentRuntimeSpec {
  return {
    agentId: randomUUID(),
    framework: plugin.name,
    config: validateConfig(plugin, {}),
    modelProxy: {
      baseUrl: `${appUrl}/v1`,
      token: randomToken(PROXY_TOKEN_PREFIX, 32),
      model: hostedModelName(),
    },
  }
}
