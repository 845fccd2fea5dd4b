import type { HttpContext } from '@adonisjs/core/http'
import { AuthRequiredException, ForbiddenException } from '#core/exceptions/api_exceptions'
import { findAgent, ownedAgent } from '#agents/services/agent_access'
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
  async start({ auth, params }: HttpContext) {
    return agentLifecycle.start(await ownedAgent(auth.getUserOrFail(), params.id))
  }

  async stop({ auth, params }: HttpContext) {
    return agentLifecycle.stop(await ownedAgent(auth.getUserOrFail(), params.id))
  }

  async restart({ auth, params }: HttpContext) {
    return agentLifecycle.restart(await ownedAgent(auth.getUserOrFail(), params.id))
  }

  async status({ auth, params }: HttpContext) {
    return statusOf(await ownedAgent(auth.getUserOrFail(), params.id))
  }

  async stats({ auth, params }: HttpContext) {
    return statsOf(await ownedAgent(auth.getUserOrFail(), params.id))
  }

  async monitoring({ auth, params }: HttpContext) {
    return monitoringOf(await ownedAgent(auth.getUserOrFail(), params.id))
  }

  async memory({ auth, params }: HttpContext) {
    return memoryOf(await ownedAgent(auth.getUserOrFail(), params.id))
  }

  async feed({ auth, params }: HttpContext) {
    const agent = await ownedAgent(auth.getUserOrFail(), params.id)
    return { events: await feedOf(agent.id) }
  }

  async logsToken({ auth, params }: HttpContext) {
    const agent = await ownedAgent(auth.getUserOrFail(), params.id)
    const { token, expiresAt, expiresIn } = issueLogStreamToken(agent.id, agent.userId)
    return {
      token,
      expiresIn,
      expiresAt: expiresAt.toISOString(),
      streamUrl: `/agents/${agent.id}/logs?stream=true&token=${encodeURIComponent(token)}`,
    }
  }

  async logs(ctx: HttpContext) {
    const { auth, params, request, response } = ctx
    const query = await request.validateUsing(logsValidator)
    const agent = auth.user
      ? await ownedAgent(auth.user, params.id)
      : await this.#agentForToken(params.id, query.token)
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
    // The agent changed hands or was recreated since the token was issued.
    if (agent.userId !== claims.userId) throw new ForbiddenException()
    return agent
  }
}
