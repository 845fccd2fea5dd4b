import { constants } from 'node:fs'
import { createWriteStream } from 'node:fs'
import { open, readdir, unlink } from 'node:fs/promises'
import { createHash } from 'node:crypto'
import { Transform } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { createGzip } from 'node:zlib'
import tar, { type Pack } from 'tar-stream'
import { isNotAFolder, PinnedDir } from '#runtime/files/pinned_dir'
import {
  ARCHIVED_FOLDERS,
  MANIFEST_NAME,
  type ArchivedFile,
  type Manifest,
} from '#backups/services/archive_format'

/** O_NONBLOCK: a FIFO the agent put in its folders must not hang the backup. */
const FILE_READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK
/** Deepest folder tree archived (each level holds one descriptor while it is walked). */
const MAX_DEPTH = 128
/**
 * gzip level: 6 (zlib's default) packs text-heavy workspaces well but runs
 * at ~30 MB/s here; 3 keeps most of the gain at about twice the speed.
 */
const GZIP_LEVEL = 3

export interface ArchiveInput {
  agentsDir: string
  agentId: string
  /** JSON documents by their name in the archive (agent.json, data/...). */
  documents: Record<string, unknown>
  manifest: Omit<Manifest, 'files' | 'skipped'>
}

export interface WrittenArchive {
  size: number
  sha256: string
}

function errorCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code
}

function addBuffer(pack: Pack, name: string, content: Buffer, mode = 0o644): Promise<void> {
  return new Promise((resolve, reject) =>
    pack.entry({ name, size: content.length, mode, mtime: new Date() }, content, (error) =>
      error ? reject(error) : resolve()
    )
  )
}

function addDirectory(pack: Pack, name: string, mode: number): Promise<void> {
  return new Promise((resolve, reject) =>
    pack.entry({ name, type: 'directory', mode: mode & 0o777 }, (error) =>
      error ? reject(error) : resolve()
    )
  )
}

/**
 * Streams the regular file `name` of the pinned folder into the archive,
 * opened without following a link; answers its size and hash, or
 * undefined when it is a link or not a regular file (left out).
 */
async function addFile(
  pack: Pack,
  dir: PinnedDir,
  name: string,
  archiveName: string
): Promise<ArchivedFile | undefined> {
  let handle
  try {
    handle = await open(dir.path(name), FILE_READ_FLAGS)
  } catch (error) {
    if (['ELOOP', 'ENOENT', 'ENXIO'].includes(errorCode(error) ?? '')) return undefined
    throw error
  }
  try {
    const info = await handle.stat()
    if (!info.isFile()) return undefined
    const hash = createHash('sha256')
    const header = {
      name: archiveName,
      size: info.size,
      mode: info.mode & 0o777,
      mtime: info.mtime,
    }
    if (info.size === 0) {
      await addBuffer(pack, archiveName, Buffer.alloc(0), header.mode)
    } else {
      await new Promise<void>((resolve, reject) => {
        const entry = pack.entry(header, (error) => (error ? reject(error) : resolve()))
        const source = handle!.createReadStream({ start: 0, end: info.size - 1, autoClose: false })
        source.on('data', (chunk) => hash.update(chunk))
        pipeline(source, entry).catch(reject)
      })
    }
    return { size: info.size, sha256: hash.digest('hex') }
  } finally {
    await handle.close()
  }
}

/** Archives everything below `dir` as `prefix/...`, never through a link. */
async function addTree(
  pack: Pack,
  dir: PinnedDir,
  prefix: string,
  found: { files: Record<string, ArchivedFile>; skipped: string[] },
  depth: number
): Promise<void> {
  const entries = await readdir(dir.path(), { withFileTypes: true })
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  for (const entry of entries) {
    const name = `${prefix}/${entry.name}`
    if (entry.isDirectory()) {
      if (depth >= MAX_DEPTH) {
        found.skipped.push(name)
        continue
      }
      let child: PinnedDir
      try {
        child = await dir.child(entry.name)
      } catch (error) {
        // Swapped for a link or a file since the listing: left out.
        if (isNotAFolder(error) || errorCode(error) === 'ENOENT') {
          found.skipped.push(name)
          continue
        }
        throw error
      }
      try {
        const info = await child.stat()
        await addDirectory(pack, name, info.mode)
        await addTree(pack, child, name, found, depth + 1)
      } finally {
        await child.close()
      }
    } else if (entry.isFile()) {
      const file = await addFile(pack, dir, entry.name, name)
      if (file) found.files[name] = file
      else found.skipped.push(name)
    } else {
      found.skipped.push(name)
    }
  }
}

/**
 * Writes the archive of one agent to `target` (a new file, 0600): its
 * documents, its folders (read through pinned descriptors from the agents
 * folder: a link the agent planted is left out, never followed), then the
 * manifest. Answers the archive's size and SHA-256; a failure leaves no
 * file behind.
 */
export async function writeArchive(target: string, input: ArchiveInput): Promise<WrittenArchive> {
  const pack = tar.pack()
  const archiveHash = createHash('sha256')
  let size = 0
  const measure = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      archiveHash.update(chunk)
      size += chunk.length
      callback(null, chunk)
    },
  })
  const written = pipeline(
    pack,
    createGzip({ level: GZIP_LEVEL }),
    measure,
    createWriteStream(target, { flags: 'wx', mode: 0o600 })
  )
  try {
    const found = { files: {} as Record<string, ArchivedFile>, skipped: [] as string[] }
    for (const [name, document] of Object.entries(input.documents)) {
      const content = Buffer.from(JSON.stringify(document))
      await addBuffer(pack, name, content)
      found.files[name] = {
        size: content.length,
        sha256: createHash('sha256').update(content).digest('hex'),
      }
    }
    await addDirectory(pack, 'files', 0o755)
    const agents = await PinnedDir.trusted(input.agentsDir)
    try {
      const top = await agents.child(input.agentId).catch((error) => {
        if (errorCode(error) === 'ENOENT') return undefined
        throw error
      })
      if (top) {
        try {
          for (const folder of ARCHIVED_FOLDERS) {
            const own = await top.child(folder).catch((error) => {
              if (errorCode(error) === 'ENOENT' || isNotAFolder(error)) return undefined
              throw error
            })
            if (!own) continue
            try {
              await addDirectory(pack, `files/${folder}`, 0o700)
              await addTree(pack, own, `files/${folder}`, found, 0)
            } finally {
              await own.close()
            }
          }
        } finally {
          await top.close()
        }
      }
    } finally {
      await agents.close()
    }
    const manifest: Manifest = { ...input.manifest, skipped: found.skipped, files: found.files }
    await addBuffer(pack, MANIFEST_NAME, Buffer.from(JSON.stringify(manifest, null, 2)))
    pack.finalize()
    await written
    return { size, sha256: archiveHash.digest('hex') }
  } catch (error) {
    pack.destroy(error as Error)
    await written.catch(() => {})
    await unlink(target).catch(() => {})
    throw error
  }
}
