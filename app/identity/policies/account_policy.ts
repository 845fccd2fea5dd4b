import { AuthorizationResponse, BasePolicy } from '@adonisjs/bouncer'
import type { AuthorizerResponse } from '@adonisjs/bouncer/types'
import type User from '#identity/models/user'
import { atLeast, staffRole } from '#identity/services/staff_roles'

/** An admin acting on another account: nobody changes their own role or locks themselves out. */
function adminOnAnother(staff: User, target: User, selfMessage: string): AuthorizerResponse {
  const role = staffRole(staff, 'admin')
  if (role !== true) return role
  return target.id !== staff.id || AuthorizationResponse.deny(selfMessage, 403)
}

/**
 * What staff may do to an account: the console's forms, and granting AI
 * Credits on `POST /ai-credits/grant` too. Each console route group checks
 * the role first (`consoleAuth({ role })`); the policy checks again, so a
 * forged form meets the same rule as the page that hides its button.
 */
export default class AccountPolicy extends BasePolicy {
  /** Admins only; asked before the body is read, so without the account. */
  grantCredits(staff: User): AuthorizerResponse {
    return (
      atLeast(staff.role, 'admin') ||
      AuthorizationResponse.deny('Only administrators can grant AI Credits', 403)
    )
  }

  setRole(staff: User, target: User): AuthorizerResponse {
    return adminOnAnother(staff, target, 'You cannot change your own role')
  }

  /** Disable or enable. */
  setDisabled(staff: User, target: User): AuthorizerResponse {
    return adminOnAnother(staff, target, 'You cannot disable your own account')
  }

  setPlan(staff: User, _target: User): AuthorizerResponse {
    return staffRole(staff, 'operator')
  }

  resendVerification(staff: User, _target: User): AuthorizerResponse {
    return staffRole(staff, 'support')
  }
}
