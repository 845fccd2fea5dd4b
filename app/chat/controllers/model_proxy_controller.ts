import type { HttpContext } from '@adonisjs/core/http'
import logger from '@adonisjs/core/services/logger'
import { modelProxyConfig } from '#config/model_proxy'
import {
  AgentNotRunningException,
  AuthRequiredException,
  ValidationException,
} from '#core/exceptions/api_exceptions'
import { mapError } from '#core/http/error_envelope'
import { agentForProxyToken } from '#agents/services/agent_tokens'
import {
  authenticateBearer,
  bearerFromHeader,
  credentialKind,
} from '#identity/services/token_authenticator'
import { hostedCompletion, openHostedStream } from '#chat/services/model_proxy'
import { isModelOffered } from '#chat/services/hosted_models'
import {
  lastUserText,
  localDevChunks,
  localDevCompletion,
  localDevModelEntry,
} from '#chat/services/local_dev_model'
import { WARM_UP_MARKER, WARM_UP_REPLY } from '#runtime/warm_up'
import { modelGateway } from '#core/openai/model_gateway'
import { chatConfig } from '#config/chat'
import { SseStream, abortOnDisconnect } from '#core/http/sse_stream'
import { writeRawJson } from '#chat/services/raw_json'
import { agentMonthlyBudget } from '#credits/services/credit_budgets'

/** Who calls the proxy, and so who pays: an agent (its owner) or a user with an API key. */
interface ProxyCaller {
  payerId: string
  agentId: string | null
  apiKeyId: string | null
  source: 'proxy' | 'api_key'
  agentUnbudgeted?: boolean
}

const PROXY_CREDENTIALS =
  'The model proxy needs an agent\'s proxy token or an API key: "Authorization: Bearer apx_..." or "Bearer hk_..."'

/**
 * The caller: an agent's proxy token (`apx_`: its framework; the owner
 * pays) or one of a user's API keys (`hk_`, the spec's programmatic
 * credential: the user pays). JWTs are refused: the proxy is for programs.
 */
async function proxyCaller(ctx: HttpContext): Promise<ProxyCaller> {
  const token = bearerFromHeader(ctx.request.header('authorization'))
  if (token && credentialKind(token) === 'api_key') {
    const identity = await authenticateBearer(token, { allow: ['api_key'] })
    return {
      payerId: String(identity.row.id),
      agentId: null,
      apiKeyId: identity.apiKeyId,
      source: 'api_key',
    }
  }
  const agent = token ? await agentForProxyToken(token) : null
  if (!agent) throw new AuthRequiredException(PROXY_CREDENTIALS)
  // Only a running (or sleeping, waking) agent's framework calls the proxy.
  if (agent.status !== 'active') throw new AgentNotRunningException()
  return {
    payerId: agent.userId,
    agentId: agent.id,
    apiKeyId: null,
    source: 'proxy',
    agentUnbudgeted: agentMonthlyBudget(agent.config) === null,
  }
}

function completionBody(ctx: HttpContext): Record<string, any> {
  const body = ctx.request.body()
  if (!Array.isArray(body?.messages) || body.messages.length === 0) {
    throw new ValidationException('"messages" must be a non-empty array')
  }
  if (body.model !== undefined && typeof body.model !== 'string') {
    throw new ValidationException('"model" must be a string')
  }
  return body
}

/**
 * The runtime's private warm-up turn before a first checkpoint
 * (app/runtime/warm_up.ts): answered here, free, unmetered, no upstream.
 */
function answerWarmUp(ctx: HttpContext, body: Record<string, any>) {
  if (body.stream !== true) {
    writeRawJson(ctx, 200, localDevCompletion(body.messages, WARM_UP_REPLY))
    return
  }
  const sse = new SseStream(ctx, { heartbeatMs: chatConfig.sseHeartbeatMs })
  sse.open()
  for (const chunk of localDevChunks(body.messages, WARM_UP_REPLY)) {
    if ('usage' in chunk && body.stream_options?.include_usage !== true) continue
    sse.sendData(JSON.stringify(chunk))
  }
  sse.done()
}

/**
 * The OpenAI-compatible model proxy agents' containers call, and users
 * with their API key (any OpenAI client: docs/chat.md). Answers are
 * OpenAI's own format, not the service envelope; errors use the envelope.
 */
export default class ModelProxyController {
  async completions(ctx: HttpContext) {
    const caller = await proxyCaller(ctx)
    const body = completionBody(ctx)
    if (lastUserText(body.messages).includes(WARM_UP_MARKER)) return answerWarmUp(ctx, body)
    const abort = abortOnDisconnect(ctx)
    const options = { ...caller, signal: abort.signal }
    if (body.stream !== true) {
      const { json, settled } = await hostedCompletion(body, options)
      await settled
      writeRawJson(ctx, 200, json)
      return
    }

    const wantsUsage = body.stream_options?.include_usage === true
    const stream = await openHostedStream(body, options)
    const sse = new SseStream(ctx, { heartbeatMs: chatConfig.sseHeartbeatMs })
    try {
      sse.open()
      for await (const chunk of stream.chunks()) {
        if (chunk.usageOnly && !wantsUsage) continue
        sse.sendData(chunk.data)
      }
      sse.done()
    } catch (error) {
      if (abort.signal.aborted || sse.closed) return
      const mapped = mapError(error)
      if (mapped.unexpected)
        logger.error({ err: error, agentId: caller.agentId }, 'model proxy stream failed')
      sse.send({ error: { message: mapped.body.error, code: mapped.body.code } })
      sse.done()
    } finally {
      await stream.close()
    }
  }

  async models(ctx: HttpContext) {
    await proxyCaller(ctx)
    const data: Record<string, unknown>[] = []
    const { url, apiKey, defaultModel } = modelProxyConfig.upstream
    if (url) {
      try {
        const listed = await modelGateway.models({
          url: `${url}/models`,
          headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
          party: { name: 'The model provider' },
          timeoutMs: 10_000,
        })
        // Only what a request may name: the rest would be refused with 400.
        data.push(
          ...(listed as any[]).filter(
            (entry) => typeof entry?.id === 'string' && isModelOffered(entry.id)
          )
        )
      } catch (error) {
        logger.warn({ err: error }, 'model proxy: the upstream model list is unavailable')
      }
      if (data.length === 0 && defaultModel) {
        data.push({ id: defaultModel, object: 'model', created: 0, owned_by: 'upstream' })
      }
    }
    data.push(localDevModelEntry())
    writeRawJson(ctx, 200, { object: 'list', data })
  }
}
