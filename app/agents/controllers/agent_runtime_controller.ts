import type { HttpContext } from '@adonisjs/core/http'
import { AuthRequiredException } from '#core/exceptions/api_exceptions'
import { bouncerFor } from '#policies/main'
import type Agent from '#agents/models/agent'
import AgentPolicy from '#agents/policies/agent_policy'
import { findAgent } from '#agents/services/agent_access'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import { followLogs, tailLogs } from '#agents/services/agent_logs'
import { feedOf } from '#agents/services/feed_service'
import { issueLogStreamToken, verifyLogStreamToken } from '#agents/services/log_stream_tokens'
import { writeSse } from '#agents/services/sse_writer'
import { takeStreamSlot } from '#core/http/stream_slots'
import { memoryOf, monitoringOf, statsOf, statusOf } from '#agents/services/agent_views'
import { logsValidator } from '#agents/validators/agent_validators'

/** An agent's container: lifecycle and the views of it (both surfaces for start/stop/restart/status). */
export default class AgentRuntimeController {
  async start({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('operate', agent)
    return agentLifecycle.start(agent)
  }

  async stop({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('operate', agent)
    return agentLifecycle.stop(agent)
  }

  async restart({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('operate', agent)
    return agentLifecycle.restart(agent)
  }

  async status({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return statusOf(agent)
  }

  async stats({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return statsOf(agent)
  }

  async monitoring({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return monitoringOf(agent)
  }

  async memory({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return memoryOf(agent)
  }

  async feed({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return { events: await feedOf(agent.id) }
  }

  async logsToken({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    const { token, expiresAt, expiresIn } = issueLogStreamToken(agent.id, agent.userId)
    return {
      token,
      expiresIn,
      expiresAt: expiresAt.toISOString(),
      streamUrl: `/agents/${agent.id}/logs?stream=true&token=${encodeURIComponent(token)}`,
    }
  }

  async logs(ctx: HttpContext) {
    const { auth, bouncer, params, request, response } = ctx
    const query = await request.validateUsing(logsValidator)
    let agent: Agent
    if (auth.user) {
      agent = await findAgent(params.id)
      await bouncer.with(AgentPolicy).authorize('view', agent)
    } else {
      agent = await this.#agentForToken(params.id, query.token)
    }
    const tail = query.tail ?? 100

    if (!query.stream) {
      response.header('content-type', 'text/plain; charset=utf-8')
      response.header('cache-control', 'no-store')
      // An empty log is still a 200 text answer, not a 204.
      return response.status(200).send(await tailLogs(agent, tail))
    }
    const release = await takeStreamSlot('logs', agent.userId)
    try {
      const abort = new AbortController()
      const lines = await followLogs(agent, { tail, signal: abort.signal })
      await writeSse(ctx, lines, abort)
    } finally {
      release()
    }
  }

  async #agentForToken(id: unknown, token: string | undefined) {
    if (!token) {
      throw new AuthRequiredException(
        'Send a JWT, or a logs token from POST /agents/:id/logs/token'
      )
    }
    const agentId = typeof id === 'string' ? id.toLowerCase() : ''
    const claims = verifyLogStreamToken(token, agentId)
    if (!claims) throw new AuthRequiredException('The logs token is invalid or expired')
    const agent = await findAgent(agentId)
    // The token acts for the account it was issued to, which must still own the agent.
    await bouncerFor({ id: claims.userId })
      .with(AgentPolicy)
      .authorize('followLogsWithToken', agent)
    return agent
  }
}
