import app from '@adonisjs/core/services/app'
import { ApiException, ValidationException } from '#core/exceptions/api_exceptions'
import type { FrameworkPlugin } from '#plugins/types'
import type { Config } from '#agents/services/config_secrets'
import { channelSettings } from '#channels/services/channel_config'

/** Largest config accepted, as JSON. */
export const CONFIG_MAX_BYTES = 64 * 1024

/** Deepest nesting of objects and arrays accepted in a config. */
export const CONFIG_MAX_DEPTH = 16

/**
 * Checks the nesting depth of client-sent config without recursion (so a
 * hostile, deeply nested body is a 400, never a stack overflow).
 */
export function assertConfigDepth(config: unknown): void {
  const pending: Array<[unknown, number]> = [[config, 1]]
  while (pending.length > 0) {
    const [value, depth] = pending.pop()!
    if (typeof value !== 'object' || value === null) continue
    if (depth > CONFIG_MAX_DEPTH) {
      throw new ValidationException(`config must be nested at most ${CONFIG_MAX_DEPTH} levels deep`)
    }
    for (const inner of Object.values(value)) pending.push([inner, depth + 1])
  }
}

/** The largest monthly budget accepted (fits the ledger's integer columns with room). */
export const MONTHLY_BUDGET_MAX = 1_000_000_000

/**
 * `config.budget`: absent, null or `{ monthlyCredits }` with a positive
 * integer (null or absent: no budget). The agent's monthly AI Credit
 * budget (docs/accounts.md "Budgets"), enforced by the credits area's
 * holds, which read it from the stored config.
 */
export function validateBudget(config: Config): void {
  const budget = config.budget
  if (budget === undefined || budget === null) return
  if (typeof budget !== 'object' || Array.isArray(budget)) {
    throw new ValidationException('config.budget must be an object: { monthlyCredits }')
  }
  const unknown = Object.keys(budget).filter((key) => key !== 'monthlyCredits')
  if (unknown.length > 0) {
    throw new ValidationException(
      `config.budget.${unknown[0]} is not a budget setting (only monthlyCredits)`
    )
  }
  const credits = (budget as { monthlyCredits?: unknown }).monthlyCredits
  if (credits === undefined || credits === null) return
  if (
    typeof credits !== 'number' ||
    !Number.isSafeInteger(credits) ||
    credits < 1 ||
    credits > MONTHLY_BUDGET_MAX
  ) {
    throw new ValidationException(
      `config.budget.monthlyCredits must be an integer from 1 to ${MONTHLY_BUDGET_MAX}, or null for no budget`
    )
  }
}

/** The installed framework plugin of this name; 400 naming the installed ones otherwise. */
export async function frameworkPlugin(name: string): Promise<FrameworkPlugin> {
  const registry = await app.container.make('plugins')
  const plugin = registry.findFramework(name)
  if (!plugin) {
    const installed = registry
      .frameworks()
      .map((framework) => framework.name)
      .join(', ')
    throw new ValidationException(`framework must be one of: ${installed}`)
  }
  return plugin
}

/**
 * Checks a clear config with the framework plugin's schema, the channel
 * plugins (config.channels), the monthly budget (config.budget, whatever
 * the framework) and the size limit; returns what the plugin returns. Anything the plugin throws is a
 * 400: a config is client input.
 */
export function validateConfig(plugin: FrameworkPlugin, config: Config): Config {
  if (Buffer.byteLength(JSON.stringify(config)) > CONFIG_MAX_BYTES) {
    throw new ValidationException(`config must be at most ${CONFIG_MAX_BYTES / 1024} KB as JSON`)
  }
  validateBudget(config)
  try {
    const validated = plugin.validateConfig(config)
    channelSettings(validated)
    return validated
  } catch (error) {
    if (error instanceof ApiException) throw error
    throw new ValidationException(`config is invalid: ${(error as Error).message}`)
  }
}

/** Top-level keys whose values differ (for generated commit messages; names only). */
export function changedKeys(before: Config, after: Config): string[] {
  const keys = new Set([...Object.keys(before), ...Object.keys(after)])
  return [...keys]
    .filter((key) => JSON.stringify(before[key]) !== JSON.stringify(after[key]))
    .sort()
}

/** Deep equality of two JSON configs, ignoring key order. */
export function sameConfig(a: Config, b: Config): boolean {
  return stableJson(a) === stableJson(b)
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Config).sort(([a], [b]) => (a < b ? -1 : 1))
    return `{${entries.map(([key, inner]) => `${JSON.stringify(key)}:${stableJson(inner)}`).join(',')}}`
  }
  return JSON.stringify(value)
}
