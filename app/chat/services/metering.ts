import { LOCAL_DEV_MODEL, modelProxyConfig, type ModelRate } from '#config/model_proxy'

/** Tokens billed for one model call. */
export interface TokenUsage {
  inputTokens: number
  outputTokens: number
}

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
 * Prompt tokens for the credit hold: deliberately on the high side (three
 * characters per token over the JSON of the messages), since the hold
 * must cover the real cost.
 */
export function promptTokensUpperBound(messages: unknown): number {
  return Math.ceil(JSON.stringify(messages ?? []).length / 3) + 8
}

/** The usage an OpenAI-compatible answer reports, or null. */
export function openAiUsage(body: any): TokenUsage | null {
  const usage = body?.usage
  if (!usage || typeof usage !== 'object') return null
  const input = Number(usage.prompt_tokens ?? usage.input_tokens)
  const output = Number(usage.completion_tokens ?? usage.output_tokens)
  if (!Number.isFinite(input) || !Number.isFinite(output)) return null
  return {
    inputTokens: Math.max(0, Math.round(input)),
    outputTokens: Math.max(0, Math.round(output)),
  }
}
