import type { HttpContext } from '@adonisjs/core/http'
import limiter from '@adonisjs/limiter/services/main'
import { chatConfig } from '#config/chat'
import { NotFoundException, RateLimitExceededException } from '#core/exceptions/api_exceptions'
import AgentPolicy from '#agents/policies/agent_policy'
import { findAgent } from '#agents/services/agent_access'
import { agentForWebhookToken, webhookUrlOf } from '#agents/services/agent_tokens'
import { chatWithAgent } from '#chat/services/chat_service'
import { abortOnDisconnect } from '#core/http/sse_stream'
import { idempotentJson } from '#chat/services/idempotent_route'

export default class WebhooksController {
  async url({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('chat', agent)
    return { webhookUrl: webhookUrlOf(agent), method: 'POST', body: { message: 'string' } }
  }

  async inbound(ctx: HttpContext) {
    const agent = await agentForWebhookToken(String(ctx.params.token ?? ''))
    if (!agent) throw new NotFoundException('Unknown webhook')
    const { requests, duration } = chatConfig.webhookRateLimit
    const window = limiter.use({ requests, duration })
    const allowed = await window.consume(`webhook:${agent.id}`).then(
      () => true,
      (error) => {
        if (error?.code === 'E_TOO_MANY_REQUESTS') return false
        throw error
      }
    )
    if (!allowed) {
      throw new RateLimitExceededException(
        `This webhook accepts ${requests} messages per ${duration}; retry later`
      )
    }
    const body = ctx.request.body()
    return idempotentJson(
      ctx,
      { scope: `webhook:${agent.id}`, route: 'webhooks.in', request: body },
      () =>
        chatWithAgent(
          agent,
          { message: body.message },
          { source: 'webhook', signal: abortOnDisconnect(ctx).signal }
        )
    )
  }
}
