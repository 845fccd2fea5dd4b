import { createHash } from 'node:crypto'
import { cp, lstat, mkdir, open, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises'
import { join, relative } from 'node:path'
import { inFolderBelow, writeFileBelow, type Owner } from '#runtime/files/confined_dir'
import { publishOnce, stagingName } from '#core/files/atomic_file'
import { rewriteIdentity } from '#runtime/process/criu_images'

/** The agent's own folders a template carries what its framework wrote at boot in. */
export const CARRIED_FOLDERS = ['workspace', 'state', 'home', 'tmp', 'cache'] as const
type CarriedFolder = (typeof CARRIED_FOLDERS)[number]

/** How much of a memory image is searched at once for the values a copy replaces. */
const REPLACE_CHUNK = 64 * 1024 * 1024

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
 * environment without the marker, and the Node.js binary. An agent whose
 * own differs cannot use it (`stale`).
 */
export function templateFingerprint(launch: {
  framework: string
  shape: Record<string, unknown>
  command: string
  args: string[]
  env: Record<string, string>
  node: string
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
    for (const name of CARRIED_FOLDERS) {
      // Links are copied as links, and never followed at a restore (carryFolders).
      await cp(folders[name], join(staged, 'folders', name), {
        recursive: true,
        verbatimSymlinks: true,
      })
    }
    await writeFile(join(staged, 'template.json'), `${JSON.stringify(meta)}\n`, { mode: 0o600 })
    await this.discard(key)
    // A template another instance installed meanwhile is as good: it stands.
    await publishOnce(staged, this.path(key))
  }

  /**
   * A copy of the template `key` at `target`, made the agent's: every
   * thread's credentials set to its uid and gid, the template's marker in
   * its memory replaced by the agent's id. Throws when it cannot be.
   */
  async personalisedCopy(
    key: string,
    target: string,
    agent: {
      agentId: string
      uid: number
      gid: number
      /** Template secret -> the agent's, each of the same length. */
      secrets: Array<[from: string, to: string]>
    }
  ): Promise<void> {
    const meta = await this.meta(key)
    if (!meta) throw new Error('the template is gone')
    // Replaced in place: nothing in memory may move (the environment, heap strings).
    if (Buffer.byteLength(agent.agentId) !== Buffer.byteLength(meta.marker)) {
      throw new Error(
        `agent id of ${agent.agentId.length} characters (the marker has ${meta.marker.length})`
      )
    }
    for (const [from, to] of agent.secrets) {
      if (Buffer.byteLength(from) !== Buffer.byteLength(to)) {
        throw new Error("a token of another length than the template's")
      }
    }
    await rm(target, { recursive: true, force: true })
    await cp(this.path(key), target, {
      recursive: true,
      filter: (source) => !source.startsWith(join(this.path(key), 'folders')),
    })
    await rm(join(target, 'template.json'), { force: true })
    await rewriteIdentity(target, {
      from: { uid: meta.uid, gid: meta.gid },
      to: { uid: agent.uid, gid: agent.gid },
    })
    const replaced = await replaceInPages(target, [[meta.marker, agent.agentId], ...agent.secrets])
    if (replaced[0] === 0) throw new Error("the template's marker is not in its memory")
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
    const files = await readdir(from, { recursive: true }).catch(() => [] as string[])
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

/**
 * Replaces every occurrence of each `from` by its `to` (same length) in the
 * memory images of `dir`; how many of each it replaced. Each is the
 * template's own random value (its marker, its tokens): wherever it is, it
 * stands for "this agent's". A copy a framework keeps in another form (a
 * hash, UTF-16) is not found: the token check after the restore catches it.
 */
async function replaceInPages(dir: string, pairs: Array<[string, string]>): Promise<number[]> {
  const counts = pairs.map(() => 0)
  const needles = pairs.map(([from, to]) => [Buffer.from(from), Buffer.from(to)] as const)
  const overlap = Math.max(...needles.map(([needle]) => needle.length)) - 1
  const chunk = Buffer.alloc(REPLACE_CHUNK + overlap)
  for (const name of await readdir(dir)) {
    if (!/^pages-\d+\.img$/.test(name)) continue
    // In place, a chunk at a time (an OpenClaw gateway's images are ~0.8 GB): only the
    // bytes replaced are written.
    const handle = await open(join(dir, name), 'r+')
    try {
      for (let offset = 0; ; offset += REPLACE_CHUNK) {
        const { bytesRead } = await handle.read(chunk, 0, chunk.length, offset)
        if (bytesRead === 0) break
        const view = chunk.subarray(0, bytesRead)
        for (const [index, [needle, replacement]] of needles.entries()) {
          for (let at = view.indexOf(needle); at !== -1; at = view.indexOf(needle, at + 1)) {
            // A match starting in the overlap is the next chunk's.
            if (at >= REPLACE_CHUNK) break
            await handle.write(replacement, 0, replacement.length, offset + at)
            counts[index]++
          }
        }
        if (bytesRead < chunk.length) break
      }
    } finally {
      await handle.close()
    }
  }
  return counts
}
