import { createWriteStream, type Stats } from 'node:fs'
import { unlink, type FileHandle } from 'node:fs/promises'
import { createHash } from 'node:crypto'
import { Transform, type TransformCallback } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { promisify } from 'node:util'
import { deflateRaw, gzip as gzipCallback } from 'node:zlib'
import tar, { type Pack } from 'tar-stream'
import { PinnedDir } from '#runtime/files/pinned_dir'
import { MANIFEST_NAME, type ArchivedFile, type Manifest } from '#backups/services/archive_format'
import { SEPARATE_FOLDERS, walkAgentFolders } from '#backups/services/folder_walk'
import type { HostFolders } from '#runtime/types'

/**
 * gzip level: 6 (zlib's default) packs text-heavy workspaces well but runs
 * at ~30 MB/s here; 3 keeps most of the gain at about twice the speed.
 */
const GZIP_LEVEL = 3
/**
 * Files of this size or more are sampled first: one whose first 64 KB do
 * not shrink by 5 % at level 1 (media, archives, model weights, random
 * bytes) is stored at level 0. Deflating such data gains nothing and costs
 * the most (~20 ms of CPU per MB here: most of a backup's time).
 */
const SAMPLED_FROM = 128 * 1024
const SAMPLE_BYTES = 64 * 1024
/** Bytes of the tar per gzip member (LeveledGzip): deflate's window is 32 KB, so nothing is lost. */
const SEGMENT_BYTES = 1024 * 1024

const gzipAsync = promisify(gzipCallback)
const deflateRawAsync = promisify(deflateRaw)

/**
 * Where the agent's folders are read from: where the runtime keeps them
 * (an agent asleep), or a snapshot of them taken while it was frozen
 * (folder_snapshot.ts), with what that copy left out.
 */
export type FolderSource = { host: HostFolders } | { snapshot: string; skipped: string[] }

export interface ArchiveInput {
  folders: FolderSource
  /** Entries of the agent's folders never archived (the framework's rendered secrets), by archive name. */
  leftOut: string[]
  /** JSON documents by their name in the archive (agent.json, data/...). */
  documents: Record<string, unknown>
  manifest: Omit<Manifest, 'files' | 'skipped'>
}

export interface WrittenArchive {
  size: number
  sha256: string
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

/** True when the file's first bytes do not compress: it is stored, not deflated. */
async function incompressible(handle: FileHandle, info: Stats): Promise<boolean> {
  if (info.size < SAMPLED_FROM) return false
  const sample = Buffer.alloc(SAMPLE_BYTES)
  const { bytesRead } = await handle.read(sample, 0, SAMPLE_BYTES, 0)
  const packed = await deflateRawAsync(sample.subarray(0, bytesRead), { level: 1 })
  return packed.length > bytesRead * 0.95
}

/**
 * The archive's gzip, written as a series of members (RFC 1952: a gzip
 * file may hold several one after the other; gunzip, tar and Node's gunzip
 * read them as one stream), each of up to SEGMENT_BYTES of the tar and at
 * the `level` the writer had set when it began: stored for files that do
 * not compress. zlib's own switch of level mid-stream (deflateParams) does
 * not take in Node once data went through. A switch lands at about the
 * file's start (earlier bytes may still be on their way): it only ever
 * costs a little ratio, never correctness. Members are compressed on the
 * thread pool, off the service's event loop.
 */
class LeveledGzip extends Transform {
  level = GZIP_LEVEL
  #segmentLevel = GZIP_LEVEL
  #pending: Buffer[] = []
  #pendingBytes = 0

  async #emit(): Promise<void> {
    if (this.#pendingBytes === 0) return
    const segment = Buffer.concat(this.#pending, this.#pendingBytes)
    this.#pending = []
    this.#pendingBytes = 0
    this.push(await gzipAsync(segment, { level: this.#segmentLevel }))
  }

  async #take(chunk: Buffer): Promise<void> {
    if (this.level !== this.#segmentLevel) {
      await this.#emit()
      this.#segmentLevel = this.level
    }
    this.#pending.push(chunk)
    this.#pendingBytes += chunk.length
    if (this.#pendingBytes >= SEGMENT_BYTES) await this.#emit()
  }

  _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback) {
    this.#take(chunk).then(() => callback(), callback)
  }

  _flush(callback: TransformCallback) {
    this.#emit().then(() => callback(), callback)
  }
}

/** Streams the open file into the archive as `name`; answers its size and hash. */
async function addFile(
  pack: Pack,
  gzip: LeveledGzip,
  name: string,
  handle: FileHandle,
  info: Stats
): Promise<ArchivedFile> {
  gzip.level = (await incompressible(handle, info)) ? 0 : GZIP_LEVEL
  const hash = createHash('sha256')
  const mode = info.mode & 0o777
  if (info.size === 0) {
    await addBuffer(pack, name, Buffer.alloc(0), mode)
  } else {
    await new Promise<void>((resolve, reject) => {
      const entry = pack.entry({ name, size: info.size, mode, mtime: info.mtime }, (error) =>
        error ? reject(error) : resolve()
      )
      const source = handle.createReadStream({ start: 0, end: info.size - 1, autoClose: false })
      source.on('data', (chunk) => hash.update(chunk))
      pipeline(source, entry).catch(reject)
    })
  }
  return { size: info.size, sha256: hash.digest('hex') }
}

/** Archives the agent's folders from `source`; answers what was left out. */
async function addFolders(
  pack: Pack,
  gzip: LeveledGzip,
  input: ArchiveInput,
  files: Record<string, ArchivedFile>
): Promise<string[]> {
  const source = input.folders
  const host = 'host' in source ? source.host : { root: source.snapshot, folders: SEPARATE_FOLDERS }
  const root = await PinnedDir.trusted(host.root)
  try {
    const visitor = {
      folder: (name: string, _entry: string, mode: number) => addDirectory(pack, name, mode),
      file: async (name: string, _entry: string, handle: FileHandle, info: Stats) => {
        files[name] = await addFile(pack, gzip, name, handle, info)
      },
    }
    const leftOut = new Set(input.leftOut)
    const skipped = await walkAgentFolders(root, host.folders, undefined, visitor, leftOut)
    return 'snapshot' in source ? [...source.skipped, ...skipped] : skipped
  } finally {
    await root.close()
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
  const gzip = new LeveledGzip()
  const written = pipeline(
    pack,
    gzip,
    measure,
    createWriteStream(target, { flags: 'wx', mode: 0o600 })
  )
  try {
    const files: Record<string, ArchivedFile> = {}
    for (const [name, document] of Object.entries(input.documents)) {
      const content = Buffer.from(JSON.stringify(document))
      await addBuffer(pack, name, content)
      files[name] = {
        size: content.length,
        sha256: createHash('sha256').update(content).digest('hex'),
      }
    }
    await addDirectory(pack, 'files', 0o755)
    const skipped = await addFolders(pack, gzip, input, files)
    gzip.level = GZIP_LEVEL
    const manifest: Manifest = { ...input.manifest, skipped, files }
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
