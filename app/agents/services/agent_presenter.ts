import type Agent from '#agents/models/agent'
import { maskSecrets } from '#agents/services/config_secrets'

/** List item (spec: id, name, slug, status, framework, messageCount, createdAt). */
export interface AgentListItem {
  id: string
  name: string
  slug: string
  status: string
  framework: string
  messageCount: number
  createdAt: string
}

/** Detail: the list item plus description, avatarUrl, masked config, integrations. */
export interface AgentDetail extends AgentListItem {
  description: string | null
  avatarUrl: string | null
  config: Record<string, unknown>
  integrations: string[]
  lastActiveAt: string | null
  updatedAt: string
}

/** What anyone may see through GET /agents/by-slug/:slug. */
export interface AgentPublicView {
  id: string
  name: string
  slug: string
  description: string | null
  avatarUrl: string | null
  framework: string
  status: string
}

export function presentListItem(agent: Agent): AgentListItem {
  return {
    id: agent.id,
    name: agent.name,
    slug: agent.slug,
    status: agent.status,
    framework: agent.framework,
    messageCount: agent.messageCount,
    createdAt: agent.createdAt.toUTC().toISO()!,
  }
}

export function presentDetail(agent: Agent): AgentDetail {
  return {
    ...presentListItem(agent),
    description: agent.description,
    avatarUrl: agent.avatarUrl,
    // The stored config has the same keys as the clear one: masking needs no decryption.
    config: maskSecrets(agent.config),
    integrations: agent.integrations ?? [],
    lastActiveAt: agent.lastActiveAt?.toUTC().toISO() ?? null,
    updatedAt: agent.updatedAt.toUTC().toISO()!,
  }
}

export function presentPublic(agent: Agent): AgentPublicView {
  return {
    id: agent.id,
    name: agent.name,
    slug: agent.slug,
    description: agent.description,
    avatarUrl: agent.avatarUrl,
    framework: agent.framework,
    status: agent.status,
  }
}
