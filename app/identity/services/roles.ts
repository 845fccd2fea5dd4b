import { ForbiddenException } from '#core/exceptions/api_exceptions'
import type { Role } from '#identity/models/user'

/** 403 FORBIDDEN unless the user holds one of the roles. */
export function requireRole(user: { role: Role }, roles: Role[], message?: string): void {
  if (!roles.includes(user.role)) {
    throw new ForbiddenException(message ?? 'You are not allowed to do this')
  }
}
