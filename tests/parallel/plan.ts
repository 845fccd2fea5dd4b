/**
 * Which spec files each shard of bin/test_parallel.ts runs: the suites'
 * files (adonisrc.ts), balanced by their measured times (tests/timings.json)
 * so the shards end together, with the files that use something of the
 * whole host kept together in one shard, where they run one after another
 * as they do in a single `node ace test`.
 */
import { existsSync, readFileSync } from 'node:fs'
import { glob } from 'node:fs/promises'

/**
 * Files that use a resource of the whole host, not one a shard can have of
 * its own; each group runs in one shard, its files one after another.
 */
export const HOST_WIDE_GROUPS: { why: string; files: string[] }[] = [
  {
    // The host's Docker engine: the docker driver's sweep stops every managed container of
    // the engine that its own service does not know (another shard's agents), the images are
    // built under fixed tags, swarm_driver makes the engine itself a swarm manager and
    // swarm_node_loss runs a 3-node swarm on it. agent_network and docker_driver both make
    // the fixed private LAN (tests/helpers/private_lan.ts: ahtest-lan, 192.168.251.0/30).
    why: 'the Docker engine and the private LAN',
    files: [
      'tests/functional/runtime/docker_driver.spec.ts',
      'tests/functional/runtime/openclaw_docker.spec.ts',
      'tests/functional/runtime/hermes_docker.spec.ts',
      'tests/functional/runtime/swarm_driver.spec.ts',
      'tests/functional/runtime/agent_network.spec.ts',
      'tests/functional/agents/hermes_docker_api.spec.ts',
      'tests/functional/backups/docker_backups.spec.ts',
      'tests/faults/swarm_node_loss.spec.ts',
      // The red team's server on the docker driver: its boot sweeps the engine.
      'tests/redteam/tenant_boundary_docker.spec.ts',
    ],
  },
  {
    // build/ of the checkout (tests/helpers/built_server.ts: `scripts/start.mjs --build-only`).
    why: 'the build/ folder',
    files: [
      'tests/functional/core/npm_start.spec.ts',
      'tests/functional/console/built_server.spec.ts',
    ],
  },
]

export interface Suite {
  name: string
  files: string | string[]
}

export interface SpecFile {
  file: string
  suite: string
}

/** Every spec file of `suites`, in japa's order within each suite. */
export async function specFiles(suites: Suite[], cwd: string): Promise<SpecFile[]> {
  const found: SpecFile[] = []
  for (const suite of suites) {
    const files: string[] = []
    for (const pattern of Array.isArray(suite.files) ? suite.files : [suite.files]) {
      for await (const file of glob(pattern, { cwd })) files.push(file)
    }
    files.sort((a, b) => a.localeCompare(b, undefined, { numeric: true, sensitivity: 'base' }))
    for (const file of new Set(files)) found.push({ file, suite: suite.name })
  }
  return found
}

/**
 * japa's `--files` filter (a file's path ends with the filter, or its last
 * segments end with the filter's), applied here so no shard gets no file.
 */
export function matchesFileFilter(file: string, filters: string[]): boolean {
  const withoutSuffix = file.replace(/(\.spec|\.test)?\.[cm]?[jt]s$/, '')
  return filters.some((filter) => {
    if (file.endsWith(filter)) return true
    const filterSegments = filter.split('/').reverse()
    const fileSegments = withoutSuffix.split('/').reverse()
    return filterSegments.every(
      (segment, index) =>
        fileSegments[index] && (segment === '*' || fileSegments[index].endsWith(segment))
    )
  })
}

export type Timings = Record<string, number>

export function readTimings(path: string): Timings {
  if (!existsSync(path)) return {}
  return JSON.parse(readFileSync(path, 'utf8')) as Timings
}

export interface Shard {
  index: number
  files: SpecFile[]
  /** What the timings expect it to take (ms). */
  expectedMs: number
}

/**
 * Longest first, each to the shard with the least work so far (LPT): a
 * host-wide group counts as one piece. A file without a timing counts as
 * the median of the known ones.
 */
export function partition(files: SpecFile[], timings: Timings, shardCount: number): Shard[] {
  const known = Object.values(timings).sort((a, b) => a - b)
  const fallback = known.length > 0 ? known[Math.floor(known.length / 2)] : 5_000
  // At least a millisecond: files measured at 0 still spread over the shards.
  const cost = (file: SpecFile) => Math.max(1, timings[file.file] ?? fallback)

  const pieces: SpecFile[][] = []
  const grouped = new Set<string>()
  for (const group of HOST_WIDE_GROUPS) {
    const members = files.filter((file) => group.files.includes(file.file))
    members.forEach((file) => grouped.add(file.file))
    if (members.length > 0) pieces.push(members)
  }
  for (const file of files) if (!grouped.has(file.file)) pieces.push([file])

  const weight = (piece: SpecFile[]) => piece.reduce((sum, file) => sum + cost(file), 0)
  pieces.sort((a, b) => weight(b) - weight(a))
  const count = Math.max(1, Math.min(shardCount, pieces.length))
  const shards: Shard[] = Array.from({ length: count }, (_, index) => ({
    index: index + 1,
    files: [],
    expectedMs: 0,
  }))
  for (const piece of pieces) {
    const lightest = shards.reduce((best, shard) =>
      shard.expectedMs < best.expectedMs ? shard : best
    )
    lightest.files.push(...piece)
    lightest.expectedMs += weight(piece)
  }
  // japa runs a shard's files suite by suite, each suite's in order: list them so too.
  const order = new Map(files.map((file, index) => [file.file, index]))
  for (const shard of shards) shard.files.sort((a, b) => order.get(a.file)! - order.get(b.file)!)
  return shards
    .filter((shard) => shard.files.length > 0)
    .map((shard, index) => ({ ...shard, index: index + 1 }))
}
