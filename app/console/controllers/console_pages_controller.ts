import type { HttpContext } from '@adonisjs/core/http'
import { overviewFigures } from '#console/services/overview_service'
import {
  accountDetail,
  agentDetail,
  CONSOLE_PAGE_SIZE,
  ticketDetail,
} from '#console/services/directory'
import { accountsPage } from '#identity/queries/console_accounts'
import { agentsPage } from '#agents/queries/console_agents'
import { paymentsPage } from '#billing/queries/console_payments'
import { auditPage } from '#console/services/audit_service'
import { ticketQueue, ticketCounts } from '#support/services/ticket_desk'
import { listQueryValidator } from '#console/validators/console_validators'
import { tierOrder } from '#config/plans'
import { atLeast } from '#identity/services/staff_roles'

/** The console's read-only pages. Actions live in ConsoleActionsController. */
export default class ConsolePagesController {
  async overview({ view, staff }: HttpContext) {
    return view.render('console/pages/overview', {
      figures: await overviewFigures(),
      hostView: atLeast(staff.role, 'operator'),
    })
  }

  async overviewFigures() {
    return overviewFigures()
  }

  async accounts({ view, request }: HttpContext) {
    const { q, page = 1 } = await listQueryValidator.validate(request.qs())
    return view.render('console/pages/accounts', {
      q: q ?? '',
      result: await accountsPage(q, page, CONSOLE_PAGE_SIZE),
    })
  }

  async account({ view, params, session }: HttpContext) {
    return view.render('console/pages/account', {
      ...(await accountDetail(params.id)),
      tierOrder,
      notice: session.flashMessages.get('notice'),
    })
  }

  async agents({ view, request }: HttpContext) {
    const { q, page = 1 } = await listQueryValidator.validate(request.qs())
    return view.render('console/pages/agents', {
      q: q ?? '',
      result: await agentsPage(q, page, CONSOLE_PAGE_SIZE),
    })
  }

  async agent({ view, params, session }: HttpContext) {
    return view.render('console/pages/agent', {
      ...(await agentDetail(params.id)),
      notice: session.flashMessages.get('notice'),
    })
  }

  async support({ view, request }: HttpContext) {
    const { q, page = 1, status = 'open' } = await listQueryValidator.validate(request.qs())
    const [result, counts] = await Promise.all([
      ticketQueue({ status, search: q, page }),
      ticketCounts(),
    ])
    return view.render('console/pages/support', { q: q ?? '', status, page, result, counts })
  }

  async ticket({ view, params, session, staff }: HttpContext) {
    return view.render('console/pages/ticket', {
      ...(await ticketDetail(params.id, { withBackups: atLeast(staff.role, 'operator') })),
      notice: session.flashMessages.get('notice'),
    })
  }

  async payments({ view, request }: HttpContext) {
    const { q, page = 1 } = await listQueryValidator.validate(request.qs())
    return view.render('console/pages/payments', {
      q: q ?? '',
      result: await paymentsPage(q, page, CONSOLE_PAGE_SIZE),
    })
  }

  async audit({ view, request }: HttpContext) {
    const { q, page = 1 } = await listQueryValidator.validate(request.qs())
    return view.render('console/pages/audit', { q: q ?? '', page, ...(await auditPage(page, q)) })
  }
}
