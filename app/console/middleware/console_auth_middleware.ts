import type { HttpContext } from '@adonisjs/core/http'
import type { NextFn } from '@adonisjs/core/types/http'
import User from '#identity/models/user'
import { ForbiddenException } from '#core/exceptions/api_exceptions'
import { bouncerFor } from '#policies/main'
import { atLeast, isStaff, needsTotp, type StaffRole } from '#identity/services/staff_roles'

export const SESSION_USER = 'console_user_id'
export const SESSION_PENDING = 'console_pending_user_id'

declare module '@adonisjs/core/http' {
  interface HttpContext {
    staff: User
  }
}

/**
 * Console pages: a signed-in staff member whose account is enabled (the
 * row is read on every request, so a role change or a disabled account
 * takes effect at once), with TOTP set up where the role needs it, and at
 * least the role the route asks for.
 */
export default class ConsoleAuthMiddleware {
  async handle(ctx: HttpContext, next: NextFn, options: { role?: StaffRole } = {}) {
    const userId = ctx.session.get(SESSION_USER)
    const user = typeof userId === 'string' ? await User.find(userId) : null
    if (!user || user.disabledAt || !isStaff(user.role)) {
      ctx.session.forget(SESSION_USER)
      if (user && !isStaff(user.role))
        throw new ForbiddenException('Your account has no console access')
      return ctx.response.redirect('/console/login')
    }
    if (needsTotp(user.role) && !user.totpEnabledAt) {
      ctx.session.forget(SESSION_USER)
      ctx.session.put(SESSION_PENDING, user.id)
      return ctx.response.redirect('/console/totp/setup')
    }
    if (options.role && !atLeast(user.role, options.role)) {
      throw new ForbiddenException(`This page needs the ${options.role} role`)
    }
    ctx.staff = user
    // Console requests carry no bearer credential: their bouncer acts for the staff member.
    ctx.bouncer = bouncerFor(user, ctx.containerResolver)
    ctx.view.share({
      staff: user,
      can: {
        operate: atLeast(user.role, 'operator'),
        administer: atLeast(user.role, 'admin'),
      },
    })
    return next()
  }
}
