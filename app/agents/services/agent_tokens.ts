import encryption from '@adonisjs/core/services/encryption'
import { appUrl } from '#config/app'
import { randomToken, sha256 } from '#identity/services/secure_tokens'
import Agent from '#agents/models/agent'

/**
 * The two per-agent secrets the agents area issues at creation (256 random
 * bits each), stored as SHA-256 (for lookup) plus an encrypted copy (the
 * clear value is needed again):
 * - the model-proxy token (`apx_...`): the agent's container calls the
 *   service's model proxy (`${APP_URL}/v1`) with it; the chat area finds
 *   the agent with `agentForProxyToken`;
 * - the webhook token (`whk_...`): the secret path part of the inbound
 *   webhook URL `${APP_URL}/webhooks/in/<token>` (`agentForWebhookToken`,
 *   `webhookUrlOf`).
 */
export const PROXY_TOKEN_PREFIX = 'apx_'
export const WEBHOOK_TOKEN_PREFIX = 'whk_'

export interface AgentTokenColumns {
  proxyTokenHash: string
  proxyTokenEncrypted: string
  webhookTokenHash: string
  webhookTokenEncrypted: string
}

/** Fresh tokens for a new agent, as column values. */
export function issueAgentTokens(): AgentTokenColumns {
  const proxyToken = randomToken(PROXY_TOKEN_PREFIX, 32)
  const webhookToken = randomToken(WEBHOOK_TOKEN_PREFIX, 32)
  return {
    proxyTokenHash: sha256(proxyToken),
    proxyTokenEncrypted: encryption.encrypt(proxyToken),
    webhookTokenHash: sha256(webhookToken),
    webhookTokenEncrypted: encryption.encrypt(webhookToken),
  }
}

function decrypt(value: string, what: string): string {
  const clear = encryption.decrypt<string>(value)
  if (typeof clear !== 'string') throw new Error(`The agent's ${what} cannot be decrypted`)
  return clear
}

/** The clear model-proxy token (for the runtime spec). */
export function proxyTokenOf(agent: Agent): string {
  return decrypt(agent.proxyTokenEncrypted, 'proxy token')
}

/** The clear webhook token. */
export function webhookTokenOf(agent: Agent): string {
  return decrypt(agent.webhookTokenEncrypted, 'webhook token')
}

/** `{base_url}/webhooks/in/<webhook_token>`. */
export function webhookUrlOf(agent: Agent): string {
  return `${appUrl}/webhooks/in/${webhookTokenOf(agent)}`
}

function plausible(token: unknown, prefix: string): token is string {
  return typeof token === 'string' && token.startsWith(prefix) && token.length <= 200
}

/** The agent whose model-proxy token this is, or null. */
export async function agentForProxyToken(token: string): Promise<Agent | null> {
  if (!plausible(token, PROXY_TOKEN_PREFIX)) return null
  return Agent.findBy('proxy_token_hash', sha256(token))
}

/** The agent whose webhook token this is, or null. */
export async function agentForWebhookToken(token: string): Promise<Agent | null> {
  if (!plausible(token, WEBHOOK_TOKEN_PREFIX)) return null
  return Agent.findBy('webhook_token_hash', sha256(token))
}
