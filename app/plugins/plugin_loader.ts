import { existsSync } from 'node:fs'
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { Plugin, PluginKind } from '#plugins/types'

/** A plugin folder that cannot be loaded; stops boot with the folder and the reason. */
export class InvalidPluginError extends Error {
  constructor(
    readonly folder: string,
    readonly reason: string
  ) {
    super(`Invalid plugin in "${folder}": ${reason}`)
    this.name = 'InvalidPluginError'
  }
}

const REQUIRED_MEMBERS: Record<
  PluginKind,
  Record<string, 'function' | 'string' | 'number' | 'object'>
> = {
  framework: {
    validateConfig: 'function',
    renderFiles: 'function',
    processLaunch: 'function',
    containerLaunch: 'function',
    readinessPath: 'string',
    defaultPort: 'number',
    containerPaths: 'object',
    resources: 'object',
    chatEndpoint: 'function',
    readMemory: 'function',
  },
  channel: {
    validateCredentials: 'function',
    connect: 'function',
    maxMessageLength: 'number',
    connectsBy: 'string',
  },
}

const NAME_PATTERN = /^[a-z][a-z0-9_-]{1,39}$/
const VERSION_PATTERN = /^\d+\.\d+\.\d+([-+].+)?$/

/** Checks the shape of a plugin's default export; returns why it is wrong, if it is. */
export function describePluginProblem(candidate: unknown): string | undefined {
  if (typeof candidate !== 'object' || candidate === null) {
    return 'index must default-export a plugin definition object'
  }
  const plugin = candidate as Record<string, unknown>
  if (plugin.kind !== 'framework' && plugin.kind !== 'channel') {
    return `"kind" must be "framework" or "channel", got ${JSON.stringify(plugin.kind)}`
  }
  if (typeof plugin.name !== 'string' || !NAME_PATTERN.test(plugin.name)) {
    return `"name" must be lower-case letters, digits, "-" or "_" (2-40 chars), got ${JSON.stringify(plugin.name)}`
  }
  if (typeof plugin.version !== 'string' || !VERSION_PATTERN.test(plugin.version)) {
    return `"version" must be a semantic version, got ${JSON.stringify(plugin.version)}`
  }
  for (const [member, type] of Object.entries(REQUIRED_MEMBERS[plugin.kind])) {
    // eslint-disable-next-line valid-typeof -- `type` is one of the typeof names above
    if (typeof plugin[member] !== type || plugin[member] === null) {
      return `${plugin.kind} plugin "${plugin.name}" is missing ${type} "${member}"`
    }
  }
  return undefined
}

function entryFile(folder: string): string | undefined {
  return ['index.js', 'index.ts'].map((file) => join(folder, file)).find((file) => existsSync(file))
}

/**
 * Loads every plugins/<folder>/index.{js,ts}. Folders starting with "." or
 * "_" are skipped. Any malformed plugin or duplicate name throws.
 */
export async function loadPlugins(directory: string): Promise<Plugin[]> {
  if (!existsSync(directory)) return []

  const entries = await readdir(directory, { withFileTypes: true })
  const folders = entries
    .filter((entry) => entry.isDirectory() && !/^[._]/.test(entry.name))
    .map((entry) => join(directory, entry.name))
    .sort()

  const plugins: Plugin[] = []
  const seen = new Map<string, string>()
  for (const folder of folders) {
    const file = entryFile(folder)
    if (!file) throw new InvalidPluginError(folder, 'no index.ts or index.js')

    let module: { default?: unknown }
    try {
      module = await import(pathToFileURL(file).href)
    } catch (error) {
      throw new InvalidPluginError(folder, `index failed to load: ${(error as Error).message}`)
    }

    const problem = describePluginProblem(module.default)
    if (problem) throw new InvalidPluginError(folder, problem)

    const plugin = module.default as Plugin
    const key = `${plugin.kind}:${plugin.name}`
    if (seen.has(key)) {
      throw new InvalidPluginError(
        folder,
        `duplicate ${plugin.kind} name "${plugin.name}" (also in ${seen.get(key)})`
      )
    }
    seen.set(key, folder)
    plugins.push(plugin)
  }
  return plugins
}
