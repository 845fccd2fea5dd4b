import { delimiter, dirname } from 'node:path'
import type { AgentPaths } from '#runtime/agent_paths'
import { TRUST_VARIABLES } from '#runtime/package_cache'

/** Marks an agent's processes, so the supervisor can recognise them after a service restart. */
export const AGENT_MARKER_VARIABLE = 'AGENT_HOST_AGENT_ID'

/**
 * The agents folder of the service that started it, where HOME does not say
 * (the fixed layout: HOME is /agent/home in every agent's sandbox).
 */
export const AGENTS_DIR_VARIABLE = 'AGENT_HOST_AGENTS_DIR'

const SYSTEM_PATH = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin']

/**
 * The child's whole environment, built from scratch: none of the service's
 * variables (APP_KEY, DATABASE_URL, MODEL_API_KEY, ...) can reach an agent.
 * The host's CA-bundle variables (NODE_EXTRA_CA_CERTS, SSL_CERT_FILE,
 * SSL_CERT_DIR) are passed on when set.
 * PATH holds the service's Node.js folder and the system folders; a PATH
 * the plugin asks for is put in front. The plugin's other variables are
 * added as they are, except the marker, which stays the agent's id.
 */
export function buildChildEnv(options: {
  agentId: string
  paths: AgentPaths
  nodeExecutable: string
  pluginEnv: Record<string, string>
  /** Named in the environment (AGENTS_DIR_VARIABLE) when HOME is not under it. */
  agentsDir?: string
}): Record<string, string> {
  const { paths, pluginEnv } = options
  const basePath = [dirname(options.nodeExecutable), ...SYSTEM_PATH]
  // CA bundles are host configuration, not secrets: agents calling HTTPS providers need them.
  const trust: Record<string, string> = {}
  for (const name of TRUST_VARIABLES) {
    const value = process.env[name]
    if (value) trust[name] = value
  }
  const path = [...(pluginEnv.PATH ? pluginEnv.PATH.split(delimiter) : []), ...basePath]
  return {
    HOME: paths.home,
    TMPDIR: paths.tmp,
    TMP: paths.tmp,
    TEMP: paths.tmp,
    XDG_CONFIG_HOME: paths.xdgConfig,
    XDG_DATA_HOME: paths.xdgData,
    XDG_STATE_HOME: paths.xdgState,
    XDG_CACHE_HOME: paths.cache,
    LANG: 'C.UTF-8',
    LC_ALL: 'C.UTF-8',
    ...trust,
    ...pluginEnv,
    PATH: [...new Set(path)].join(delimiter),
    ...(options.agentsDir ? { [AGENTS_DIR_VARIABLE]: options.agentsDir } : {}),
    [AGENT_MARKER_VARIABLE]: options.agentId,
  }
}
