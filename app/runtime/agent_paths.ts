import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { ValidationException } from '#core/exceptions/api_exceptions'
import type { AgentFolders } from '#plugins/types'

/** Agent ids become folder and container names: letters, digits, `-` and `_` only. */
const AGENT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/

export function assertAgentId(agentId: string): void {
  if (!AGENT_ID_PATTERN.test(agentId)) {
    throw new ValidationException(`Invalid agent id "${agentId}"`)
  }
}

/** Everything one agent owns locally, under `<agentsDir>/<agentId>/`. */
export interface AgentPaths extends AgentFolders {
  /** The runtime's own files: process record, credentials, output log. */
  runtime: string
  /** Captured stdout and stderr (size-capped, one rotated file beside it). */
  logFile: string
  /** pid, start time and port of the live process (process driver). */
  recordFile: string
  /** The per-agent gateway token (mode 0600). */
  credentialsFile: string
  xdgConfig: string
  xdgData: string
  xdgState: string
}

/**
 * Folder layout of one agent: `workspace/` (the file manager's root),
 * `state/` (framework config and data), `home/` (HOME and XDG config/data),
 * `tmp/` (TMPDIR), `cache/` (XDG_CACHE_HOME) and `runtime/`.
 */
export function agentPaths(agentsDir: string, agentId: string): AgentPaths {
  assertAgentId(agentId)
  const root = join(agentsDir, agentId)
  const home = join(root, 'home')
  const runtime = join(root, 'runtime')
  return {
    root,
    state: join(root, 'state'),
    workspace: join(root, 'workspace'),
    home,
    tmp: join(root, 'tmp'),
    cache: join(root, 'cache'),
    runtime,
    logFile: join(runtime, 'output.log'),
    recordFile: join(runtime, 'process.json'),
    credentialsFile: join(runtime, 'credentials.json'),
    xdgConfig: join(home, '.config'),
    xdgData: join(home, '.local', 'share'),
    xdgState: join(home, '.local', 'state'),
  }
}

/** Creates the agent's folders; private to the service's user. */
export async function ensureAgentFolders(paths: AgentPaths): Promise<void> {
  await mkdir(paths.root, { recursive: true, mode: 0o700 })
  for (const dir of [
    paths.state,
    paths.workspace,
    paths.home,
    paths.tmp,
    paths.cache,
    paths.runtime,
    paths.xdgConfig,
    paths.xdgData,
    paths.xdgState,
  ]) {
    await mkdir(dir, { recursive: true, mode: 0o700 })
  }
}
