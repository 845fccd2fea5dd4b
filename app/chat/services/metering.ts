import { LOCAL_DEV_MODEL, modelProxyConfig, type ModelRate } from '#config/model_proxy'
import type { TokenUsage } from '#core/openai/wire'

/** Tokens billed for one model call (the wire's usage). */
export type { TokenUsage }

const FREE: ModelRate = { input: 0, output: 0 }

/** The built-in development model answers: the one free model (CONTRACT.md, AI Credits). */
function isBuiltInLocalModel(model: string): boolean {
  return model === LOCAL_DEV_MODEL && !modelProxyConfig.upstream.url
}

/**
 * The rate of a model: longest matching key of the table, else the default.
 * Rates of zero in the table do not make a model free (only the built-in
 * local model is), so a misconfigured entry cannot give usage away.
 */
export function rateFor(model: string): ModelRate {
  if (isBuiltInLocalModel(model)) return FREE
  const rate = tableRate(model)
  return rate.input > 0 || rate.output > 0 ? rate : modelProxyConfig.defaultRate
}

function tableRate(model: string): ModelRate {
  const { rates, defaultRate } = modelProxyConfig
  const name = model.toLowerCase()
  const bare = name.includes('/') ? name.slice(name.lastIndexOf('/') + 1) : name
  if (rates[name]) return rates[name]
  if (rates[bare]) return rates[bare]
  let best: string | undefined
  for (const key of Object.keys(rates)) {
    if (bare.startsWith(key) && (!best || key.length > best.length)) best = key
  }
  return best ? rates[best] : defaultRate
}

/** Whole credits for a call: rates are per million tokens, rounded up. */
export function creditsFor(model: string, usage: TokenUsage): number {
  const rate = rateFor(model)
  const micro = usage.inputTokens * rate.input + usage.outputTokens * rate.output
  return micro <= 0 ? 0 : Math.ceil(micro / 1_000_000)
}

export function isFreeModel(model: string): boolean {
  return isBuiltInLocalModel(model)
}

/** About four characters per token (used when a provider reports no usage). */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4)
}

/**
 * Tokens a part of a message may cost that its bytes do not bound: an
 * image, audio or file is priced by the provider by what it holds, not by
 * the length of its URL or id. The hold assumes this many per such part.
 */
export const MEDIA_PART_TOKENS = 50_000

/** Prompt-template tokens a provider adds around the request (role markers, tool preamble). */
const PROMPT_OVERHEAD_TOKENS = 64

function mediaParts(messages: unknown): number {
  if (!Array.isArray(messages)) return 0
  let count = 0
  for (const message of messages) {
    if (!Array.isArray(message?.content)) continue
    for (const part of message.content) {
      if (part && typeof part === 'object' && part.type !== 'text') count++
    }
  }
  return count
}

/**
 * Prompt tokens for the credit hold: a bound, not an estimate. Every field
 * of the body that goes upstream counts (messages, tools, functions,
 * response_format schemas, ...): a token is at least one byte of its text,
 * and the JSON of the body is at least as long as the text the provider
 * tokenizes from it, so its UTF-8 byte count bounds the tokens. Media
 * parts add MEDIA_PART_TOKENS each, the template PROMPT_OVERHEAD_TOKENS.
 */
export function promptTokensUpperBound(request: Record<string, unknown>): number {
  return (
    Buffer.byteLength(JSON.stringify(request), 'utf8') +
    mediaParts(request.messages) * MEDIA_PART_TOKENS +
    PROMPT_OVERHEAD_TOKENS
  )
}
