import { LOCAL_DEV_MODEL, modelProxyConfig } from '#config/model_proxy'
import { ValidationException } from '#core/exceptions/api_exceptions'

/**
 * Which models the hosted path offers and which provider answers them
 * (config/model_proxy.ts: MODEL_API_URL, MODEL_NAME, MODEL_ALLOWLIST, the
 * rate table). The model proxy resolves every request's model here before
 * any credits are held.
 */

/**
 * Whether requests may name this model upstream (`modelAllowlist` in
 * config/model_proxy.ts). Without MODEL_ALLOWLIST: MODEL_NAME, and a model
 * of the rate table by its own name, with a `vendor/` prefix or as a dated
 * snapshot (`gpt-4o-mini`, `openai/gpt-4o-mini`, `gpt-4o-mini-2024-07-18`),
 * never a longer name that merely starts like one (`gpt-5-pro` is not
 * `gpt-5`: it costs several times more).
 */
export function isModelOffered(model: string): boolean {
  const { modelAllowlist, upstream, rates } = modelProxyConfig
  if (modelAllowlist) return modelAllowlist.includes('*') || modelAllowlist.includes(model)
  if (model === upstream.defaultModel) return true
  const name = model.toLowerCase()
  const bare = name.slice(name.lastIndexOf('/') + 1)
  const snapshot = bare.replace(/-(\d{4}-\d{2}-\d{2}|\d{8})$/, '')
  return Object.hasOwn(rates, name) || Object.hasOwn(rates, bare) || Object.hasOwn(rates, snapshot)
}

/** The model names a refusal suggests. */
function offeredModelNames(): string[] {
  const { modelAllowlist, upstream, rates } = modelProxyConfig
  const names = modelAllowlist ?? [
    ...(upstream.defaultModel ? [upstream.defaultModel] : []),
    ...Object.keys(rates),
  ]
  return [...new Set([...names, LOCAL_DEV_MODEL])]
}

/**
 * The model a request is answered by (`local-dev` without an upstream).
 * A model that is not offered is refused here, before any credits are
 * held: without an upstream too, so `local-dev` never answers for a name
 * the service would refuse once MODEL_API_URL is set.
 */
export function resolveHostedModel(requested: unknown): { model: string; local: boolean } {
  const upstream = modelProxyConfig.upstream
  const named = typeof requested === 'string' && requested.trim() ? requested.trim() : null
  if (named === LOCAL_DEV_MODEL) return { model: LOCAL_DEV_MODEL, local: true }
  if (named && !isModelOffered(named)) {
    throw new ValidationException(
      `model: "${named.slice(0, 100)}" is not offered here; use one of: ${offeredModelNames().join(', ')}`
    )
  }
  if (!upstream.url) return { model: LOCAL_DEV_MODEL, local: true }
  const model = named ?? upstream.defaultModel
  if (!model) {
    throw new ValidationException('model: none named, and MODEL_NAME is not set')
  }
  return { model, local: false }
}

const KNOWN_PROVIDERS: [RegExp, string][] = [
  [/(^|\.)openai\.com$/, 'openai'],
  [/(^|\.)openrouter\.ai$/, 'openrouter'],
  [/(^|\.)anthropic\.com$/, 'anthropic'],
  [/(^|\.)groq\.com$/, 'groq'],
  [/(^|\.)together\.(ai|xyz)$/, 'together'],
  [/(^|\.)mistral\.ai$/, 'mistral'],
]

let providerCache: { url: string; name: string } | undefined

/** The usage-history `provider` of hosted calls: a known vendor's name, else the upstream's host. */
export function hostedProviderName(local: boolean): string {
  if (local) return LOCAL_DEV_MODEL
  const url = modelProxyConfig.upstream.url ?? ''
  if (providerCache?.url === url) return providerCache.name
  let host = 'hosted'
  try {
    host = new URL(url).hostname
  } catch {}
  const name = KNOWN_PROVIDERS.find(([pattern]) => pattern.test(host))?.[1] ?? host
  providerCache = { url, name }
  return name
}
