import type { HttpContext } from '@adonisjs/core/http'
import db from '@adonisjs/lucid/services/db'
import app from '@adonisjs/core/services/app'
import { maskSecrets } from '#agents/services/config_secrets'
import { overviewFigures } from '#console/services/overview_service'
import { agentMonitoring } from '#console/services/directory'
import { containerOf } from '#agents/services/agent_views'
import { findAgent } from '#agents/services/agent_access'
import {
  accountDetail,
  paymentsPage,
  searchAccounts,
  searchAgents,
} from '#console/services/directory'
import { auditPage } from '#console/services/audit_service'
import { ticketForStaff, ticketQueue, ticketCounts } from '#support/services/ticket_desk'
import { listQueryValidator } from '#console/validators/console_validators'
import { tierOrder } from '#config/plans'
import { atLeast } from '#console/services/staff_roles'
import { phaseOf } from '#runtime/boot_phases'
import { agentActionsFor } from '#console/services/staff_actions'

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
      result: await searchAccounts(q, page),
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
    return view.render('console/pages/agents', { q: q ?? '', result: await searchAgents(q, page) })
  }

  async agent({ view, params, session }: HttpContext) {
    const agent = await findAgent(params.id)
    const runtime: any = await app.container.make('runtime')
    const [owner, feed, container, logs, monitoring, schedules, channels] = await Promise.all([
      db.from('users').where('id', agent.userId).select('id', 'email').first(),
      db
        .from('agent_feed_events')
        .where('agent_id', agent.id)
        .orderBy('created_at', 'desc')
        .limit(20)
        .select('type', 'content', 'created_at'),
      runtime.status(agent.id).catch(() => null),
      runtime.logs(agent.id, { tail: 50 }).catch(() => ''),
      agentMonitoring(agent.id),
      db
        .from('agent_schedules')
        .where('agent_id', agent.id)
        .orderBy('created_at', 'asc')
        .select('name', 'cron', 'timezone', 'enabled', 'next_run_at', 'last_run_at'),
      db
        .from('agent_channels')
        .where('agent_id', agent.id)
        .orderBy('channel', 'asc')
        .select('channel', 'state', 'identity', 'last_error', 'holder', 'lease_expires_at'),
    ])
    const containerField = await containerOf(agent).catch(() => 'unknown')
    const config = maskSecrets(agent.config as Record<string, unknown>)
    return view.render('console/pages/agent', {
      agent,
      owner,
      feed,
      container,
      logs,
      monitoring,
      schedules,
      channels,
      containerField,
      actions: agentActionsFor(containerField),
      phase: phaseOf(agent.id, containerField),
      config: JSON.stringify(config, null, 2),
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

  async ticket({ view, params, session }: HttpContext) {
    const staffMembers = await db
      .from('users')
      .whereIn('role', ['support', 'operator', 'admin'])
      .whereNull('disabled_at')
      .orderBy('email')
      .limit(200)
      .select('id', 'email')
    return view.render('console/pages/ticket', {
      ...(await ticketForStaff(params.id)),
      staffMembers,
      notice: session.flashMessages.get('notice'),
    })
  }

  async payments({ view, request }: HttpContext) {
    const { q, page = 1 } = await listQueryValidator.validate(request.qs())
    return view.render('console/pages/payments', {
      q: q ?? '',
      result: await paymentsPage(q, page),
    })
  }

  async audit({ view, request }: HttpContext) {
    const { q, page = 1 } = await listQueryValidator.validate(request.qs())
    return view.render('console/pages/audit', { q: q ?? '', page, ...(await auditPage(page, q)) })
  }
}
