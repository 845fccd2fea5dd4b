import { modelProxyConfig } from '#config/model_proxy'
import { ValidationException } from '#core/exceptions/api_exceptions'

/**
 * What the model proxy sends upstream of a client's request: the fields
 * it forwards, the model, one output limit (what the credit hold covers)
 * and the stream settings.
 */

/**
 * The most output tokens a request may produce, and what its hold covers:
 * the largest limit the client named in either field (a small one in one
 * field cannot hide a large one in the other), else the default reserve.
 */
export function maxOutputTokens(body: Record<string, any>): number {
  const named = [body.max_completion_tokens, body.max_tokens]
    .map(Number)
    .filter((value) => Number.isSafeInteger(value) && value > 0)
  return named.length > 0 ? Math.max(...named) : modelProxyConfig.reserveOutputTokens
}

/**
 * Request fields forwarded upstream: generation settings only. Anything
 * else (`n`, `best_of`, provider-specific extras) never reaches the
 * provider. Whatever is forwarded is priced: the hold covers the bytes of
 * the whole forwarded body (promptTokensUpperBound).
 */
const FORWARDED_FIELDS = [
  'messages',
  'temperature',
  'top_p',
  'stop',
  'presence_penalty',
  'frequency_penalty',
  'seed',
  'response_format',
  'tools',
  'tool_choice',
  'functions',
  'function_call',
  'parallel_tool_calls',
  'user',
  'logit_bias',
  'logprobs',
  'top_logprobs',
] as const

/** The body sent upstream: forwarded fields, the model, one output limit, stream settings. */
export function upstreamBody(
  body: Record<string, any>,
  model: string,
  limit: number,
  stream: boolean
): Record<string, any> {
  if (body.n !== undefined && body.n !== null && Number(body.n) !== 1) {
    throw new ValidationException('"n" must be 1: one completion per request')
  }
  const request: Record<string, any> = { model }
  for (const field of FORWARDED_FIELDS) if (body[field] !== undefined) request[field] = body[field]
  setOutputLimit(request, body, limit)
  request.stream = stream
  if (stream) request.stream_options = { include_usage: true }
  return request
}

/** One limit field, the one the client used (providers differ in which they take). */
export function setOutputLimit(
  request: Record<string, any>,
  body: Record<string, any>,
  limit: number
) {
  if (body.max_completion_tokens !== undefined) request.max_completion_tokens = limit
  else request.max_tokens = limit
}
