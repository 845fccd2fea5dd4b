import { createHash } from 'node:crypto'
import { cp, lstat, mkdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises'
import { join, relative } from 'node:path'
import { inFolderBelow, writeFileBelow, type Owner } from '#runtime/files/confined_dir'
import { publishOnce, stagingName } from '#core/files/atomic_file'
import { rewriteIdentity } from '#runtime/process/criu_images'
import {
  SWAP_TABLE_BODY,
  entriesBelow,
  newEpoch,
  recordIdentities,
  swapTablePage,
  type FileIdentity,
  type RecordedIdentity,
} from '#runtime/process/file_identities'
import {
  PARENT_LINK,
  findPatches,
  writeIncrementalPages,
  type PagePatch,
  type TemplateValue,
} from '#runtime/process/template_pages'

/** The agent's own folders a template carries what its framework wrote at boot in. */
export const CARRIED_FOLDERS = ['workspace', 'state', 'home', 'tmp', 'cache'] as const
type CarriedFolder = (typeof CARRIED_FOLDERS)[number]

/** Just the carried folders of an agent's paths (host path by name). */
export function carriedFolders(paths: Record<CarriedFolder, string>): Record<string, string> {
  return Object.fromEntries(CARRIED_FOLDERS.map((name) => [name, paths[name]]))
}

/** The template's own files beside its images: never a copy's. */
const TEMPLATE_FILES = ['template.json', 'identities.json', 'patches.json', 'folders']

/**
 * Template checkpoints: new agents started from a warm framework instead of
 * a cold boot (docs/runtime.md "New agents from a template").
 *
 * A template is a CRIU checkpoint of a framework that booted once, in the
 * fixed layout (app/runtime/process/sandbox.ts: its folders at the same
 * paths for every agent, a pid namespace of its own, the same port in its
 * network namespace), under a uid of its own, from a config holding only
 * what changes the framework's boot (the plugin's `template.shape`: no
 * secret, no personality). A new agent gets a copy of the images made its
 * own: the credentials of every thread set to its uid (criu_images.ts), the
 * template's marker in memory replaced by the agent's id; CRIU binds the
 * agent's own folders where the template's were (named mounts) and restores
 * into the agent's root folder, network namespace and cgroups. The
 * framework then re-reads its rendered files (its gateway token) on the
 * plugin's reload signal, and the service checks it answers to the agent's
 * token before anyone is routed to it. Anything that fails is a cold boot,
 * counted by reason (TemplateFallback).
 */

/** Why a new agent booted cold instead of starting from a template. */
export const TEMPLATE_FALLBACKS = [
  /** No template for its framework and config shape yet (one is built meanwhile). */
  'missing',
  /** The template is of another launch (framework version, Node.js, environment). */
  'stale',
  /** Its images could not be made the agent's (an id of another length, an odd image). */
  'identity',
  /** CRIU could not restore it. */
  'restore',
  /** Restored, but it did not take the agent's own token: killed. */
  'personalise',
] as const
export type TemplateFallback = (typeof TEMPLATE_FALLBACKS)[number]

/** What the driver counts: template starts and cold boots by reason. */
export interface TemplateCounts {
  restored: number
  coldBoots: Record<TemplateFallback, number>
}

export function emptyTemplateCounts(): TemplateCounts {
  return {
    restored: 0,
    coldBoots: Object.fromEntries(TEMPLATE_FALLBACKS.map((reason) => [reason, 0])) as Record<
      TemplateFallback,
      number
    >,
  }
}

/** CRIU failures to restore one template in a row after which it is built again. */
export const RESTORE_FAILURES_TO_REBUILD = 2

/**
 * Template starts and cold boots by reason (TemplateCounts), and CRIU's
 * failures to restore each template in a row (any template start ends the
 * row). A template CRIU cannot restore (a file it held open that its copies
 * do not have) would otherwise send every new agent to a cold boot until the
 * framework's next version.
 */
export class TemplateOutcomes {
  readonly #counts = emptyTemplateCounts()
  readonly #failuresInARow = new Map<string, number>()

  counts(): TemplateCounts {
    return structuredClone(this.#counts)
  }

  /**
   * Counts a new agent's start from the template `key`: true when it is the
   * RESTORE_FAILURES_TO_REBUILD-th CRIU failure in a row (the template is to
   * be built again; the row begins anew).
   */
  record(key: string, outcome: 'restored' | TemplateFallback): boolean {
    if (outcome === 'restored') {
      this.#counts.restored++
      this.#failuresInARow.delete(key)
      return false
    }
    this.#counts.coldBoots[outcome]++
    if (outcome !== 'restore') return false
    const failures = (this.#failuresInARow.get(key) ?? 0) + 1
    if (failures < RESTORE_FAILURES_TO_REBUILD) {
      this.#failuresInARow.set(key, failures)
      return false
    }
    this.#failuresInARow.delete(key)
    return true
  }
}

export interface TemplateMeta {
  key: string
  /** templateFingerprint of the launch it was taken of. */
  fingerprint: string
  /** `<name>@<version>`. */
  framework: string
  /** The uid and gid it ran under, which each copy's credentials replace. */
  uid: number
  gid: number
  /** The marker (an agent id of its own) in its memory, which each copy replaces. */
  marker: string
  /**
   * Its own gateway and model proxy tokens (worthless: random, known to
   * nobody else), which each copy replaces in memory by the agent's where
   * they are as long, and which a started agent must refuse.
   */
  gatewayToken: string
  modelProxyToken: string
  port: number
  bytes: number
  createdAt: string
}

/** Which template an agent of this framework and boot config shape starts from. */
export function templateKey(framework: string, shape: Record<string, unknown>): string {
  return createHash('sha256')
    .update(JSON.stringify({ framework, shape }))
    .digest('hex')
    .slice(0, 24)
}

/**
 * What a template was taken of: the framework's version and the launch
 * inside the sandbox (the same for every agent in the fixed layout), its
 * environment without the marker, the Node.js binary, and where it calls
 * the model proxy (its memory holds the address: a relay on another port
 * after a restart of the service would be a dead one). An agent whose own
 * differs cannot use it (`stale`).
 */
export function templateFingerprint(launch: {
  framework: string
  shape: Record<string, unknown>
  command: string
  args: string[]
  env: Record<string, string>
  node: string
  modelProxy: { baseUrl: string; model: string }
}): string {
  return createHash('sha256').update(JSON.stringify(launch)).digest('hex')
}

export class TemplateStore {
  constructor(readonly dir: string) {}

  path(key: string): string {
    return join(this.dir, key)
  }

  async meta(key: string): Promise<TemplateMeta | undefined> {
    try {
      return JSON.parse(await readFile(join(this.path(key), 'template.json'), 'utf8'))
    } catch {
      return undefined
    }
  }

  /** The identities of what its framework had in its folders at the dump. */
  async identities(key: string): Promise<RecordedIdentity[]> {
    return JSON.parse(await readFile(join(this.path(key), 'identities.json'), 'utf8'))
  }

  async discard(key: string): Promise<void> {
    await rm(this.path(key), { recursive: true, force: true })
  }

  /**
   * Takes the images in `checkpointDir` (moved, same file system) as the
   * template `key`, with a copy of what its framework wrote in its own
   * folders by then (`folders`): a restored framework holds some of those
   * files open (OpenClaw its SQLite store), and CRIU reopens them by path
   * and checks their size.
   */
  async install(
    key: string,
    checkpointDir: string,
    meta: TemplateMeta,
    folders: Record<CarriedFolder, string>
  ): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 })
    // A name of its own: another instance on this storage may build the same template now.
    const staged = stagingName(this.path(key))
    await rename(checkpointDir, staged)
    await rm(join(staged, 'checkpoint.json'), { force: true })
    // What its framework saw of its folders (file_identities.ts): a copy shows these again.
    const identities = await recordIdentities(carriedFolders(folders))
    await writeFile(join(staged, 'identities.json'), JSON.stringify(identities), { mode: 0o600 })
    for (const name of CARRIED_FOLDERS) {
      // Links are copied as links, and never followed at a restore (carryFolders).
      await cp(folders[name], join(staged, 'folders', name), {
        recursive: true,
        verbatimSymlinks: true,
      })
    }
    // Where each copy writes (template_pages.ts): found once, the images never change.
    const patches = await findPatches(staged, {
      marker: meta.marker,
      gatewayToken: meta.gatewayToken,
      modelProxyToken: meta.modelProxyToken,
    })
    if (!patches.some((patch) => 'value' in patch && patch.value === 'marker')) {
      throw new Error("the template's marker is not in its memory")
    }
    if (!patches.some((patch) => 'table' in patch)) {
      throw new Error("the file identity table is not in the template's memory")
    }
    await writeFile(join(staged, 'patches.json'), JSON.stringify(patches), { mode: 0o600 })
    await writeFile(join(staged, 'template.json'), `${JSON.stringify(meta)}\n`, { mode: 0o600 })
    await this.discard(key)
    // A template another instance installed meanwhile is as good: it stands.
    await publishOnce(staged, this.path(key))
  }

  /**
   * Throws when the agent cannot have a copy of the template whose meta this
   * is: values replaced in memory are replaced in place, so nothing in it
   * may move (the environment, heap strings).
   */
  static assertPersonalisable(meta: TemplateMeta, values: Record<TemplateValue, string>): void {
    if (Buffer.byteLength(values.marker) !== Buffer.byteLength(meta.marker)) {
      throw new Error(
        `agent id of ${values.marker.length} characters (the marker has ${meta.marker.length})`
      )
    }
    for (const name of ['gatewayToken', 'modelProxyToken'] as const) {
      if (Buffer.byteLength(values[name]) !== Buffer.byteLength(meta[name])) {
        throw new Error("a token of another length than the template's")
      }
    }
  }

  /**
   * A copy of the template `key` at `target`, made the agent's: every
   * thread's credentials set to its uid and gid; in its memory the
   * template's marker, gateway and model proxy tokens replaced by the
   * agent's `values` (the marker by its id), the file identity swaps
   * (file_identities.ts) and a new epoch in every process's table. Its
   * memory is the template's but for those pages (template_pages.ts: CRIU
   * reads the rest from the template's images). Throws when it cannot be.
   */
  async personalisedCopy(
    key: string,
    target: string,
    agent: {
      uid: number
      gid: number
      values: Record<TemplateValue, string>
      swaps: Array<[from: FileIdentity, to: FileIdentity]>
    }
  ): Promise<void> {
    const meta = await this.meta(key)
    if (!meta) throw new Error('the template is gone')
    TemplateStore.assertPersonalisable(meta, agent.values)
    const source = this.path(key)
    const patches: PagePatch[] = JSON.parse(await readFile(join(source, 'patches.json'), 'utf8'))
    await rm(target, { recursive: true, force: true })
    // Every image but the pages (and the pagemaps, written below).
    await cp(source, target, {
      recursive: true,
      filter: (path) => {
        const name = relative(source, path)
        return !TEMPLATE_FILES.includes(name.split('/')[0]) && !/^pages-\d+\.img$/.test(name)
      },
    })
    // Relative: CRIU reads pages from inside the restored root, where the host's paths are not.
    await symlink(relative(target, source), join(target, PARENT_LINK))
    await rewriteIdentity(target, {
      from: { uid: meta.uid, gid: meta.gid },
      to: { uid: agent.uid, gid: agent.gid },
    })
    const epoch = newEpoch()
    const values = Object.fromEntries(
      Object.entries(agent.values).map(([name, value]) => [name, Buffer.from(value)])
    ) as Record<TemplateValue, Buffer>
    await writeIncrementalPages(source, target, (file) =>
      patches
        .filter((patch) => patch.file === file)
        .map((patch) =>
          'value' in patch
            ? { offset: patch.offset, bytes: values[patch.value] }
            : {
                offset: patch.offset + SWAP_TABLE_BODY,
                bytes: swapTablePage(agent.swaps, patch.table, epoch),
              }
        )
    )
  }
}

/**
 * Writes the files the template's framework had written in its own folders
 * into the agent's (`folders`, under `agentsDir`), as the agent's, where the
 * agent has none of that name: its own rendered files win. Never through a
 * link (writeFileBelow); folders are made, links and anything but plain
 * files and folders are not carried.
 * How many files it wrote.
 */
export async function carryFolders(
  store: TemplateStore,
  key: string,
  agentsDir: string,
  folders: Record<CarriedFolder, string>,
  owner: Owner | undefined
): Promise<number> {
  let written = 0
  for (const name of CARRIED_FOLDERS) {
    const from = join(store.path(key), 'folders', name)
    const files = await entriesBelow(from)
    for (const file of files) {
      const source = join(from, file)
      const info = await lstat(source)
      const target = join(folders[name], relative(from, source))
      if (info.isDirectory()) {
        // Folders too, empty ones included (a framework may expect its own there).
        const create = { mode: info.mode & 0o777, owner }
        await inFolderBelow(agentsDir, relative(agentsDir, target), create, async () => {})
        continue
      }
      if (!info.isFile()) continue
      const wrote = await writeFileBelow(agentsDir, target, await readFile(source), {
        mode: info.mode & 0o777,
        owner,
        onlyIfMissing: true,
      })
      if (wrote) written++
    }
  }
  return written
}
