/**
 * What the runtime benches (bench:wake, bench:template) start their agents
 * with: one spec shape, and OpenClaw's package fetched once, untimed.
 */
import { PackageCache } from '#runtime/package_cache'
import { OPENCLAW_VERSION } from '../../plugins/openclaw/index.ts'

/** A bench agent's runtime spec, its model calls going to the stand-in provider at `providerUrl`. */
export function benchAgentSpec(agentId: string, framework: string, providerUrl: string) {
  return {
    agentId,
    framework,
    config: { personality: 'A benchmark agent.' },
    modelProxy: { baseUrl: providerUrl, token: 'bench-proxy-token', model: 'stand-in' },
  }
}

/** OpenClaw's package in the bench's cache (installed before anything is timed). */
export function ensureOpenClawPackage(cacheDir: string): Promise<unknown> {
  return new PackageCache({
    cacheDir,
    log: (message) => console.error(`[cache] ${message}`),
  }).ensure('openclaw', OPENCLAW_VERSION)
}
