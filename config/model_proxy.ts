import env from '#start/env'

/**
 * The hosted model proxy (`/v1/chat/completions`, `/v1/models`) and what
 * hosted model usage costs in AI Credits (CONTRACT.md "AI Credits").
 *
 * Rates are whole AI Credits per million tokens, separately for input
 * (prompt) and output (completion) tokens; a request costs
 * `ceil((input * rate.input + output * rate.output) / 1_000_000)`, so any
 * paid request costs at least 1 credit. A model is priced by the longest
 * key of `rates` its name starts with, after dropping a `vendor/` prefix
 * (`openai/gpt-4o-mini-2024-07-18` -> `gpt-4o-mini`); unknown models pay
 * `defaultRate`. Only the built-in `local-dev` model (answering when
 * MODEL_API_URL is unset) is free; with an upstream every model is paid,
 * `local-dev` included.
 *
 * The object is mutable on purpose: tests point `upstream` at a local
 * stand-in server and add rates for its model.
 */
export interface ModelRate {
  /** Credits per million input tokens. */
  input: number
  /** Credits per million output tokens. */
  output: number
}

export interface ModelProxyConfig {
  upstream: {
    /** OpenAI-compatible base URL (`.../v1`); unset: the built-in `local-dev` model answers. */
    url: string | null
    apiKey: string | null
    /** Model used when a request names none. */
    defaultModel: string | null
  }
  /** Longest wait for the upstream's answer (or a stream's first bytes). */
  timeoutMs: number
  /** Longest silence within a streamed answer before it is broken off as failed. */
  streamIdleTimeoutMs: number
  /**
   * Output tokens reserved up front for a request without `max_tokens`:
   * the credit hold covers the prompt plus this many output tokens.
   */
  reserveOutputTokens: number
  /** How long a credit hold may stay unsettled before a job returns it (a crashed request). */
  holdTtlMs: number
  /**
   * The models requests may name upstream. MODEL_ALLOWLIST (comma-separated):
   * those names plus MODEL_NAME. Unset (`null`): MODEL_NAME plus the models
   * of `rates` (read at request time), so no name the rate table does not
   * price is ever forwarded at the default rate. `*`: any name (`['*']`),
   * charged at its rate or the default rate.
   */
  modelAllowlist: string[] | null
  rates: Record<string, ModelRate>
  defaultRate: ModelRate
}

/** The name of the built-in development model. */
export const LOCAL_DEV_MODEL = 'local-dev'

export const modelProxyConfig: ModelProxyConfig = {
  upstream: {
    url: env.get('MODEL_API_URL')?.replace(/\/+$/, '') || null,
    apiKey: env.get('MODEL_API_KEY') || null,
    defaultModel: env.get('MODEL_NAME') || null,
  },
  timeoutMs: 300_000,
  streamIdleTimeoutMs: 60_000,
  reserveOutputTokens: 1024,
  holdTtlMs: 60 * 60_000,
  modelAllowlist: (() => {
    const listed = (env.get('MODEL_ALLOWLIST') ?? '')
      .split(',')
      .map((name) => name.trim())
      .filter(Boolean)
    if (listed.length === 0) return null
    if (listed.includes('*')) return ['*']
    const fallback = env.get('MODEL_NAME')
    return fallback && !listed.includes(fallback) ? [...listed, fallback] : listed
  })(),
  // 1 AI Credit is about 0.0012 USD (the 25,000-credit pack costs 30 USD).
  rates: {
    'gpt-4o-mini': { input: 200, output: 800 },
    'gpt-4o': { input: 3000, output: 12000 },
    'gpt-4.1-nano': { input: 150, output: 600 },
    'gpt-4.1-mini': { input: 500, output: 2000 },
    'gpt-4.1': { input: 2500, output: 10000 },
    'gpt-5-mini': { input: 300, output: 2500 },
    'gpt-5': { input: 1500, output: 12000 },
    'claude-haiku-4-5': { input: 1200, output: 6000 },
    'claude-sonnet-4-5': { input: 4000, output: 18000 },
    'claude-opus-4': { input: 18000, output: 90000 },
    'llama-3.3-70b': { input: 800, output: 800 },
  },
  defaultRate: { input: 4000, output: 16000 },
}
