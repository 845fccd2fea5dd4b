import { randomBytes } from 'node:crypto'
import { lstat, readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { compiledC, type Compiled } from '#runtime/process/compiled_c'

/**
 * File identities across a template start (docs/runtime.md "New agents from
 * a template"). A framework restored from a template holds the identity
 * (st_dev, st_ino) of files it had at the dump: OpenClaw keys its SQLite
 * state database by `file:<dev>:<ino>` and refuses it, and its config
 * backups, once they are other inodes. An agent's folders hold its own
 * copies: the same paths, other inode numbers.
 *
 * So every fixed-layout agent runs with a small library preloaded
 * (file_identity_shim.c, compiled here with gcc into the runtime cache) that
 * answers the stat family with swapped identities from a table in its own
 * memory, empty at a boot. The template's identities are recorded at its
 * dump (recordIdentities); a copy's table is written into its memory images
 * (identitySwaps, writeSwapTables) before the restore: each of the agent's
 * files shows the identity the template's had, and the template's own inode
 * numbers (free once its folders are gone, and reusable) show the agent's.
 */

/** The shim's table: TABLE_PAGES pages, each MAGIC, its number, its count, then swaps. */
const PAGE = 4096
const TABLE_PAGES = 16
const HEADER = 32
const SWAP_BYTES = 32
const PER_PAGE = Math.floor((PAGE - HEADER) / SWAP_BYTES)
/** How many swaps one process's table holds (about two per file: file_identities' permutation). */
export const MAX_SWAPS = TABLE_PAGES * PER_PAGE
const MAGIC = Buffer.from('AgentHostFileId1')

/**
 * The shim compiled into `dir` (the runtime cache, read-only to agents), its
 * name the hash of its source: a new source is a new file, so a template of
 * the old one is stale (its environment names the library). Built once, at
 * the first fixed-layout launch (a sync probe like bubblewrap's: ~0.2 s).
 */
export function fileIdentityShim(dir: string): Compiled {
  return compiledC(dir, 'file_identity_shim.c', {
    name: 'file-identities',
    flags: ['-shared', '-fPIC'],
    libraries: ['-ldl'],
  })
}

/** A file's identity as the stat family reports it. */
export interface FileIdentity {
  dev: bigint
  ino: bigint
}

/** What the template's framework saw of one entry of its folders at the dump. */
export interface RecordedIdentity {
  /** The folder (CARRIED_FOLDERS) and the path inside it ('' for the folder itself). */
  folder: string
  path: string
  kind: 'file' | 'folder' | 'link'
  dev: string
  ino: string
}

function kindOf(info: { isFile(): boolean; isDirectory(): boolean; isSymbolicLink(): boolean }) {
  if (info.isFile()) return 'file'
  if (info.isDirectory()) return 'folder'
  if (info.isSymbolicLink()) return 'link'
  return undefined
}

/**
 * Every entry below `root`, as paths relative to it, parents before their
 * contents. Links are entries, never followed (readdir's own `recursive`
 * descends into linked folders: an OpenClaw agent's compile cache is links
 * to the shared one, ~6,000 files). Nothing when `root` is not a folder.
 */
export async function entriesBelow(root: string): Promise<string[]> {
  const found: string[] = []
  const walk = async (folder: string) => {
    const entries = await readdir(join(root, folder), { withFileTypes: true }).catch(() => [])
    for (const entry of entries) {
      const path = join(folder, entry.name)
      found.push(path)
      if (entry.isDirectory()) await walk(path)
    }
  }
  await walk('')
  return found
}

/** The identities of everything in `folders` (name -> host path), links not followed. */
export async function recordIdentities(
  folders: Record<string, string>
): Promise<RecordedIdentity[]> {
  const recorded: RecordedIdentity[] = []
  for (const [folder, root] of Object.entries(folders)) {
    const paths = ['', ...(await entriesBelow(root))]
    for (const path of paths) {
      const info = await lstat(join(root, path), { bigint: true }).catch(() => undefined)
      const kind = info && kindOf(info)
      if (!info || !kind) continue
      recorded.push({ folder, path, kind, dev: String(info.dev), ino: String(info.ino) })
    }
  }
  return recorded
}

/**
 * The swaps that make the agent's entries (in `folders`, before its first
 * process runs) show the template's identities; entries of the same path
 * and kind only. They are a permutation of identities, so no two files ever
 * show the same one: the template's inode numbers are free once its folders
 * are gone, and a file of the agent's may have been given one of them (then
 * it shows the identity of the next file along the chain, and the chain's
 * last template identity shows the first agent identity). Throws when they
 * do not fit the shim's table.
 */
export async function identitySwaps(
  recorded: RecordedIdentity[],
  folders: Record<string, string>
): Promise<Array<[from: FileIdentity, to: FileIdentity]>> {
  const key = ({ dev, ino }: FileIdentity) => `${dev}:${ino}`
  const shown = new Map<string, [FileIdentity, FileIdentity]>()
  for (const entry of recorded) {
    const root = folders[entry.folder]
    if (!root) continue
    const info = await lstat(join(root, entry.path), { bigint: true }).catch(() => undefined)
    if (!info || kindOf(info) !== entry.kind) continue
    const own = { dev: info.dev, ino: info.ino }
    const template = { dev: BigInt(entry.dev), ino: BigInt(entry.ino) }
    if (key(own) !== key(template)) shown.set(key(own), [own, template])
  }
  // Each chain own -> template -> ... ends at an identity no agent file has: it shows the
  // chain's first identity (a cycle). A chain's first is no other entry's template identity.
  const targets = new Set([...shown.values()].map(([, template]) => key(template)))
  const swaps = [...shown.values()]
  for (const [first] of shown.values()) {
    if (targets.has(key(first))) continue
    let last = shown.get(key(first))![1]
    while (shown.has(key(last))) last = shown.get(key(last))![1]
    swaps.push([last, first])
  }
  if (swaps.length > MAX_SWAPS) {
    throw new Error(`${swaps.length} identities to keep (the shim holds ${MAX_SWAPS})`)
  }
  return swaps
}

/**
 * The shim's table pages in `view` (a chunk of a memory image starting at a
 * page boundary) that start before `limit`: where, and each one's number.
 */
export function swapTablesIn(view: Buffer, limit: number): Array<{ at: number; page: number }> {
  const found: Array<{ at: number; page: number }> = []
  for (let at = view.indexOf(MAGIC); at !== -1 && at < limit; at = view.indexOf(MAGIC, at + 1)) {
    if (at % PAGE !== 0 || at + PAGE > view.length) continue
    const page = view.readUInt32LE(at + MAGIC.length)
    if (page < TABLE_PAGES) found.push({ at, page })
  }
  return found
}

/**
 * What goes after MAGIC and the page number of table page `index`: its
 * count, the copy's `epoch` (a new one for every copy: the shim reseeds
 * OpenSSL's generator when it changes) and its swaps (the rest zero).
 */
export function swapTablePage(
  swaps: Array<[from: FileIdentity, to: FileIdentity]>,
  index: number,
  epoch: number
): Buffer {
  const body = Buffer.alloc(PAGE - MAGIC.length - 4)
  const mine = swaps.slice(index * PER_PAGE, (index + 1) * PER_PAGE)
  body.writeUInt32LE(mine.length, 0)
  body.writeUInt32LE(epoch, 4)
  for (const [n, [from, to]] of mine.entries()) {
    const at = HEADER - MAGIC.length - 4 + n * SWAP_BYTES
    body.writeBigUInt64LE(from.dev, at)
    body.writeBigUInt64LE(from.ino, at + 8)
    body.writeBigUInt64LE(to.dev, at + 16)
    body.writeBigUInt64LE(to.ino, at + 24)
  }
  return body
}

/** A copy's epoch: random, never the template's 0. */
export function newEpoch(): number {
  return randomBytes(4).readUInt32LE(0) || 1
}

/** Where swapTablePage's bytes go: right after the page's MAGIC and number. */
export const SWAP_TABLE_BODY = MAGIC.length + 4
