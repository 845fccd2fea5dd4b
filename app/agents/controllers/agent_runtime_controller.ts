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
  /**
   * @start
   * @summary Start the agent's container
   * @description Answers at once with the containerId of the run it scheduled (the running one when it runs already); the container boots, waits in the boot queue or wakes afterwards. A paused agent (plan limit) answers 400.
   * @responseBody 200 - {"success":true,"data":{"status":"started","containerId":"proc-9b2f-1a2b3c"}}
   */
  async start({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('operate', agent)
    return agentLifecycle.start(agent)
  }

  /**
   * @stop
   * @summary Stop the agent's container
   * @description Answers at once: the stored status is stopped, a boot waiting or under way is cancelled and the container stops in the background. Keeps config and data; it can be started again.
   * @responseBody 200 - {"success":true,"data":{"status":"stopped"}}
   */
  async stop({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('operate', agent)
    return agentLifecycle.stop(agent)
  }

  /**
   * @restart
   * @summary Restart the agent's container
   * @description Answers at once with the new run's containerId; the container stops and boots with the current config in the background (a booting agent boots once more, not twice).
   * @responseBody 200 - {"success":true,"data":{"status":"restarted","containerId":"proc-9b2f-4d5e6f"}}
   */
  async restart({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('operate', agent)
    return agentLifecycle.restart(agent)
  }

  /**
   * @status
   * @summary Agent status (lighter than the detail)
   * @description status is one of active, stopped, paused, error (what the owner wants); containerId is the run's id from the moment it is scheduled (also while queued), null when no run is; container is where its container stands: running, starting, queued (waiting for a boot slot or memory), sleeping (idle: stopped until the next message wakes it), stopped, error. queuePosition is its 1-based place in the boot queue while container is queued (interactive starts first, accounts taking turns), else null. phase says which step of a start it is at (queued, preparing, installing, warming, booting, restoring), else the container state; phaseSince is when it got there (null when this instance did not see it).
   * @responseBody 200 - {"success":true,"data":{"status":"active","containerId":"proc-9b2f-1a2b3c","messageCount":12,"container":"running","queuePosition":null,"phase":"running","phaseSince":"2025-01-02T09:00:00.000Z"}}
   * @nullable containerId, phaseSince
   */
  async status({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return statusOf(agent)
  }

  /**
   * @stats
   * @summary Agent stats
   * @description uptimeSecs is 0 while the container is not running; container, phase and phaseSince as in status.
   * @responseBody 200 - {"success":true,"data":{"messagesProcessed":12,"uptimeSecs":3600,"lastActiveAt":"2025-01-02T10:00:00.000Z","containerId":"proc-9b2f-1a2b3c","status":"active","container":"running","queuePosition":null,"phase":"running","phaseSince":"2025-01-02T09:00:00.000Z"}}
   * @nullable lastActiveAt, containerId, phaseSince
   */
  async stats({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return statsOf(agent)
  }

  /**
   * @monitoring
   * @summary CPU, memory and restarts of the agent's container
   * @description A sleeping, queued or starting agent holds no memory: zeros, with status and container saying why. 409 AGENT_NOT_RUNNING when the agent is stopped, paused or failed.
   * @responseBody 200 - {"success":true,"data":{"cpuPercent":1.5,"memoryMb":48.2,"memoryLimitMb":1024,"restartCount":0,"status":"running","container":"running"}}
   */
  async monitoring({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return monitoringOf(agent)
  }

  /**
   * @memory
   * @summary The agent's memory store
   * @description Read from the framework's memory files in the container; 409 when not running.
   * @responseBody 200 - {"success":true,"data":{"memory":{"MEMORY.md":"- prefers short answers"}}}
   */
  async memory({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return memoryOf(agent)
  }

  /**
   * @feed
   * @summary Activity feed
   * @description The newest 50 events, newest first: status_change, error, message.
   * @responseBody 200 - {"success":true,"data":{"events":[{"id":"3c1d...","type":"status_change","content":"Agent started","ts":"2025-01-01T00:00:00.000Z"}]}}
   */
  async feed({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return { events: await feedOf(agent.id) }
  }

  /**
   * @logsToken
   * @summary A short-lived token for the live log stream
   * @description For EventSource clients, which cannot send an Authorization header: open GET /agents/:id/logs?stream=true&token=<token> within 5 minutes. The token is valid for this agent's logs only.
   * @responseBody 200 - {"success":true,"data":{"token":"lgt_...","expiresIn":300,"expiresAt":"2025-01-01T00:05:00.000Z","streamUrl":"/agents/9b2f.../logs?stream=true&token=lgt_..."}}
   */
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

  /**
   * @logs
   * @summary Container logs
   * @description Plain text, the last `tail` lines (default 100, at most 1000), secrets shown as ***. With stream=true: a live text/event-stream, one `data:` event per log line, starting with the last `tail` lines (409 when the container is not running). Authenticate with the JWT, or with `token` from POST /agents/:id/logs/token.
   * @paramQuery tail - Number of lines (default 100) - @type(number)
   * @paramQuery stream - true for a live SSE stream - @type(boolean)
   * @paramQuery token - Short-lived logs token (instead of the Authorization header) - @type(string)
   * @responseBody 200 - 2025-01-01T00:00:00.000Z [agent-host] started
   */
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
