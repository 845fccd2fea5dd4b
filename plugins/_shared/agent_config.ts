import { ValidationException } from '#core/exceptions/api_exceptions'

/**
 * Config keys every framework understands (the folder starts with `_`, so
 * the plugin loader skips it):
 * - `personality` (string): the agent's persona, rendered as SOUL.md;
 * - `instructions` (string, optional): extra operating instructions;
 * - `provider`: `hosted` (default: the service's model proxy, AI Credits),
 *   or `openai`, `anthropic`, `openrouter` with the customer's own `apiKey`;
 * - `model` (string, optional): the model id at that provider.
 * `budget` (the monthly AI Credit budget) is framework-independent: the
 * agents area checks it for every framework (app/agents/services/agent_config.ts).
 * Other keys (channel credentials, ...) pass through untouched.
 */
export const MODEL_PROVIDERS = ['hosted', 'openai', 'anthropic', 'openrouter'] as const
export type ModelProvider = (typeof MODEL_PROVIDERS)[number]

const DEFAULT_MODELS: Record<Exclude<ModelProvider, 'hosted'>, string> = {
  openai: 'gpt-4o-mini',
  anthropic: 'claude-sonnet-4-5',
  openrouter: 'openrouter/auto',
}

const OPENAI_COMPATIBLE_URLS: Record<Exclude<ModelProvider, 'hosted'>, string> = {
  openai: 'https://api.openai.com/v1',
  anthropic: 'https://api.anthropic.com/v1',
  openrouter: 'https://openrouter.ai/api/v1',
}

function optionalString(config: Record<string, unknown>, field: string, max: number) {
  const value = config[field]
  if (value === undefined || value === null) return
  if (typeof value !== 'string') throw new ValidationException(`config.${field} must be a string`)
  if (value.length > max) {
    throw new ValidationException(`config.${field} must be at most ${max} characters`)
  }
}

/** Checks the shared keys; returns the config unchanged when they are right. */
export function validateAgentConfig(config: Record<string, unknown>): Record<string, unknown> {
  if (typeof config !== 'object' || config === null || Array.isArray(config)) {
    throw new ValidationException('config must be an object')
  }
  optionalString(config, 'personality', 20_000)
  optionalString(config, 'instructions', 20_000)
  optionalString(config, 'model', 200)
  optionalString(config, 'apiKey', 500)
  const provider = config.provider ?? 'hosted'
  if (!MODEL_PROVIDERS.includes(provider as ModelProvider)) {
    throw new ValidationException(`config.provider must be one of ${MODEL_PROVIDERS.join(', ')}`)
  }
  if (provider !== 'hosted' && !config.apiKey) {
    throw new ValidationException(`config.apiKey is required with provider "${provider}"`)
  }
  if (typeof config.model === 'string' && !config.model.trim()) {
    throw new ValidationException('config.model must not be empty')
  }
  return config
}

/** Where the agent's framework sends its model calls. */
export interface ModelRoute {
  provider: ModelProvider
  /** OpenAI-compatible base URL (`.../v1`). */
  baseUrl: string
  /** The proxy token (hosted) or the customer's key. A secret. */
  apiKey: string
  model: string
}

/** The service's model proxy with the agent's token, or the customer's own provider. */
export function modelRoute(
  config: Record<string, unknown>,
  modelProxy: { baseUrl: string; token: string; model: string }
): ModelRoute {
  const provider = (config.provider ?? 'hosted') as ModelProvider
  if (provider === 'hosted') {
    return {
      provider,
      baseUrl: modelProxy.baseUrl.replace(/\/+$/, ''),
      apiKey: modelProxy.token,
      model: typeof config.model === 'string' && config.model ? config.model : modelProxy.model,
    }
  }
  return {
    provider,
    baseUrl: OPENAI_COMPATIBLE_URLS[provider],
    apiKey: String(config.apiKey),
    model:
      typeof config.model === 'string' && config.model ? config.model : DEFAULT_MODELS[provider],
  }
}

/** The agent's persona for SOUL.md. */
export function soulMarkdown(config: Record<string, unknown>): string {
  const personality =
    typeof config.personality === 'string' && config.personality.trim()
      ? config.personality.trim()
      : 'You are a helpful, friendly assistant.'
  return `# Soul\n\n${personality}\n`
}

/**
 * AGENTS.md: the standing rules and the owner's `instructions`, in the
 * agent's workspace, where both frameworks read it as context (OpenClaw's
 * workspace bootstrap files; Hermes' project context of its working
 * directory, TERMINAL_CWD). `memoryHint` says where this framework keeps
 * durable facts.
 */
export function agentsMarkdown(config: Record<string, unknown>, memoryHint: string): string {
  const extra =
    typeof config.instructions === 'string' && config.instructions.trim()
      ? `\n## Instructions from your owner\n\n${config.instructions.trim()}\n`
      : ''
  return `# AGENTS.md

You are a hosted agent. Your persona is in SOUL.md.

- This folder is your workspace; your owner sees and edits its files.
- ${memoryHint}
- Never write credentials or secrets into files.
${extra}`
}

/** Markdown memory files of a folder, keyed by their path (for readMemory). */
export async function markdownMemory(
  files: import('#plugins/types').AgentFileReader,
  root: 'state' | 'workspace',
  topFiles: string[],
  folder?: string
): Promise<Record<string, string>> {
  const memory: Record<string, string> = {}
  for (const name of topFiles) {
    const text = await files.readText(root, name)
    if (text !== undefined) memory[name] = text
  }
  if (folder) {
    for (const entry of await files.list(root, folder)) {
      if (entry.type !== 'file' || !entry.name.endsWith('.md')) continue
      const text = await files.readText(root, `${folder}/${entry.name}`)
      if (text !== undefined) memory[`${folder}/${entry.name}`] = text
    }
  }
  return memory
}
