import { createHash } from 'node:crypto'
import { existsSync, readdirSync } from 'node:fs'
import { homedir } from 'node:os'
import { basename, dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * The project root: the folder holding package.json and storage/. A built
 * server runs from build/, whose parent is the project root.
 */
export function projectRoot(appRoot: URL | string): string {
  const dir = typeof appRoot === 'string' ? resolve(appRoot) : fileURLToPath(appRoot)
  const parent = dirname(dir.replace(/\/+$/, ''))
  if (basename(dir.replace(/\/+$/, '')) === 'build' && existsSync(join(parent, 'package.json'))) {
    return parent
  }
  return dir.replace(/\/+$/, '')
}

/** Where the service keeps its local state (embedded database, keys, mail, agents). */
export function storageDir(appRoot: URL | string): string {
  return process.env.STORAGE_DIR
    ? resolve(process.env.STORAGE_DIR)
    : join(projectRoot(appRoot), 'storage')
}

/**
 * Where the agents' folders live (workspaces, state, homes). Outside the
 * project checkout by default, so nothing an agent writes sits next to the
 * service's code, config or .env:
 * - AGENTS_DIR when set;
 * - `<STORAGE_DIR>/agents` when STORAGE_DIR is set (the operator chose a place);
 * - `storage/agents` of the checkout when it already holds agents (an
 *   install from before this default: they stay where they are);
 * - otherwise `/var/lib/agent-host/<checkout>-<hash>/agents` for root, or
 *   `$XDG_DATA_HOME/agent-host/...` (`~/.local/share`) for other users; the
 *   hash of the checkout's path keeps two checkouts apart.
 */
export function agentsDir(appRoot: URL | string): string {
  if (process.env.AGENTS_DIR) return resolve(process.env.AGENTS_DIR)
  if (process.env.STORAGE_DIR) return join(resolve(process.env.STORAGE_DIR), 'agents')
  const root = projectRoot(appRoot)
  // Decided once per process: the legacy folder's contents must not flip it later.
  let chosen = chosenAgentsDirs.get(root)
  if (!chosen) chosenAgentsDirs.set(root, (chosen = defaultAgentsDir(root)))
  return chosen
}

const chosenAgentsDirs = new Map<string, string>()

function defaultAgentsDir(root: string): string {
  const legacy = join(root, 'storage', 'agents')
  if (existsSync(legacy) && readdirSync(legacy).length > 0) return legacy
  const base =
    process.getuid?.() === 0
      ? '/var/lib/agent-host'
      : join(process.env.XDG_DATA_HOME || join(homedir(), '.local', 'share'), 'agent-host')
  const id = createHash('sha256').update(root).digest('hex').slice(0, 8)
  return join(base, `${basename(root)}-${id}`, 'agents')
}
