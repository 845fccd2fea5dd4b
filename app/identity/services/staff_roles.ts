import { AuthorizationResponse } from '@adonisjs/bouncer'
import type { AuthorizerResponse } from '@adonisjs/bouncer/types'
import { roles, type Role } from '#identity/models/user'

/**
 * Console access by role, each including the one before it:
 * support (tickets; users, agents and logs read-only) < operator (+ agent
 * lifecycle, host view) < admin (+ roles, AI Credit grants, accounts on/off,
 * audit trail). A `user` has no console access.
 */
export type StaffRole = Exclude<Role, 'user'>

const RANK: Record<Role, number> = { user: 0, support: 1, operator: 2, admin: 3 }

export function isStaff(role: Role): role is StaffRole {
  return RANK[role] >= RANK.support
}

/** The roles with console access, lowest first. */
export const staffRoles: readonly StaffRole[] = roles.filter(isStaff)

/** True when `role` may do what `needed` may. */
export function atLeast(role: Role, needed: StaffRole): boolean {
  return RANK[role] >= RANK[needed]
}

/** A policy's answer for a staff action: allowed from `needed` up, else 403 naming the role. */
export function staffRole(actor: { role: Role }, needed: StaffRole): AuthorizerResponse {
  return (
    atLeast(actor.role, needed) || AuthorizationResponse.deny(`This needs the ${needed} role`, 403)
  )
}

/** Operators and admins must sign in with a second factor. */
export function needsTotp(role: Role): boolean {
  return atLeast(role, 'operator')
}
