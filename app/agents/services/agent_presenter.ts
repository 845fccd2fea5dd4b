import type Agent from '#agents/models/agent'
import { maskSecrets } from '#agents/services/config_secrets'
import { t, type Infer } from '#core/openapi/shapes'

/**
 * The answer shapes (and, through `Infer`, the types) of an agent: the
 * presenters below must return them, and /openapi.json describes them.
 */

/** List item (spec: id, name, slug, status, framework, messageCount, createdAt). */
const listItemFields = {
  id: t.uuid(),
  name: t.string(),
  slug: t.string(),
  status: t.string({ description: 'active, stopped, paused or error: what the owner wants' }),
  framework: t.string(),
  messageCount: t.integer(),
  createdAt: t.dateTime(),
}
export const agentListItemShape = t.named('AgentListItem', t.object(listItemFields))
export type AgentListItem = Infer<typeof agentListItemShape>

/** Detail: the list item plus description, avatarUrl, masked config, integrations. */
const detailFields = {
  ...listItemFields,
  description: t.nullable(t.string()),
  avatarUrl: t.nullable(t.string()),
  config: t.anyObject({ description: 'The stored config, secret values answered as ***' }),
  integrations: t.array(t.string()),
  lastActiveAt: t.nullable(t.dateTime()),
  updatedAt: t.dateTime(),
}
export const agentDetailShape = t.named('AgentDetail', t.object(detailFields))
export type AgentDetail = Infer<typeof agentDetailShape>

/** The detail after a restore: the version stored and the one restored from. */
export const restoredAgentShape = t.named(
  'RestoredAgent',
  t.object({ ...detailFields, version: t.integer(), restoredFrom: t.integer() })
)

/** What anyone may see through GET /agents/by-slug/:slug. */
export const agentPublicViewShape = t.named(
  'AgentPublicView',
  t.object({
    id: t.uuid(),
    name: t.string(),
    slug: t.string(),
    description: t.nullable(t.string()),
    avatarUrl: t.nullable(t.string()),
    framework: t.string(),
    status: t.string(),
  })
)
export type AgentPublicView = Infer<typeof agentPublicViewShape>

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
