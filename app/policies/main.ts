import { Bouncer } from '@adonisjs/bouncer'
import type { ContainerResolver } from '@adonisjs/core/container'

/**
 * Every policy by name, imported on first use, so `bouncer.with('AgentPolicy')`
 * works as well as `bouncer.with(AgentPolicy)`. Written by hand instead of
 * the assembler's generated barrel: the policies live in their areas
 * (`app/<area>/policies`). This folder sits above the areas (like start/):
 * the core may not import them (docs/architecture.md).
 */
export const policies = {
  AgentPolicy: () => import('#agents/policies/agent_policy'),
  TicketPolicy: () => import('#support/policies/ticket_policy'),
  AccountPolicy: () => import('#identity/policies/account_policy'),
}

/**
 * A Bouncer acting for `actor` (no free-standing abilities: every check is
 * its resource's policy). HTTP requests get theirs from
 * InitializeBouncerMiddleware (the request's user) and the console's auth
 * middleware (the signed-in staff member); work outside a request builds
 * one for the account it acts for, e.g. the chat WebSocket.
 */
export function bouncerFor<Actor extends { id: string }>(
  actor: Actor | null | (() => Actor | null),
  containerResolver?: ContainerResolver<any>
) {
  return new Bouncer(actor, undefined, policies).setContainerResolver(containerResolver)
}

export type ActorBouncer<Actor extends { id: string }> = ReturnType<typeof bouncerFor<Actor>>
