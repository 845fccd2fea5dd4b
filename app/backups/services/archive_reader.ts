import { createReadStream, createWriteStream } from 'node:fs'
import { mkdir, readFile, stat } from 'node:fs/promises'
import { createHash } from 'node:crypto'
import { dirname, join } from 'node:path'
import { Transform, type Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { createGunzip } from 'node:zlib'
import tar from 'tar-stream'
import { ValidationException } from '#core/exceptions/api_exceptions'
import {
  checkEntryName,
  checkManifest,
  MANIFEST_NAME,
  MAX_DOCUMENT_BYTES,
  refuseArchive,
  type Manifest,
} from '#backups/services/archive_format'

export interface UnpackLimits {
  /** Bytes all entries together may unpack to. */
  maxUnpackedBytes: number
  /** Files and folders the archive may hold. */
  maxEntries: number
}

const ENTRY_WORDS: Record<string, string> = {
  'symlink': 'a symbolic link',
  'link': 'a hard link',
  'character-device': 'a device',
  'block-device': 'a device',
  'fifo': 'a FIFO',
}

/**
 * Unpacks the archive file `archive` into `staging` (an empty folder of
 * the service's own), refusing with 400 VALIDATION_ERROR, before anything
 * reaches an agent or the database: anything but gzip-compressed tar,
 * links, devices and FIFOs, absolute paths, `..`, names outside the
 * format, the same name twice, more than the limits, and then a missing or
 * unknown manifest or any file whose size or SHA-256 differs from it (or
 * that it does not list). The caller removes `staging` afterwards, whatever
 * happened. Answers the checked manifest.
 */
export async function unpackArchive(
  archive: string,
  staging: string,
  limits: UnpackLimits
): Promise<Manifest> {
  const found = new Map<string, { size: number; sha256: string }>()
  let unpacked = 0
  let entries = 0
  const extract = tar.extract()
  extract.on('entry', (header, stream, next) => {
    const done = (error?: unknown) => {
      if (error) {
        stream.resume()
        next(error)
      } else {
        next()
      }
    }
    unpackEntry(header, stream).then(() => done(), done)
  })

  async function unpackEntry(
    header: { name: string; type?: string; size?: number; mode?: number },
    stream: Readable
  ) {
    entries += 1
    if (entries > limits.maxEntries)
      refuseArchive(`it holds more than ${limits.maxEntries} entries`)
    const type = header.type ?? 'file'
    if (type === 'pax-global-header') return drain(stream)
    if (type !== 'file' && type !== 'contiguous-file' && type !== 'directory') {
      refuseArchive(`${header.name.slice(0, 200)} is ${ENTRY_WORDS[type] ?? `a ${type} entry`}`)
    }
    const name = checkEntryName(header.name, type === 'directory' ? 'directory' : 'file')
    const target = join(staging, name)
    const mode = ((header.mode ?? 0o644) & 0o777) | 0o600
    if (type === 'directory') {
      await mkdir(target, { recursive: true, mode: mode | 0o700 })
      return drain(stream)
    }
    if (found.has(name)) refuseArchive(`${name.slice(0, 200)} appears twice`)
    const size = header.size ?? 0
    unpacked += size
    if (unpacked > limits.maxUnpackedBytes) {
      refuseArchive(`it unpacks to more than ${limits.maxUnpackedBytes} bytes`)
    }
    await mkdir(dirname(target), { recursive: true, mode: 0o700 })
    const hash = createHash('sha256')
    let written = 0
    const measure = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        hash.update(chunk)
        written += chunk.length
        callback(null, chunk)
      },
    })
    // Staging is the service's own folder and holds no links: `wx` makes each name once.
    await pipeline(stream, measure, createWriteStream(target, { flags: 'wx', mode }))
    found.set(name, { size: written, sha256: hash.digest('hex') })
  }

  try {
    await pipeline(createReadStream(archive), createGunzip(), extract)
  } catch (error) {
    if (error instanceof ValidationException) throw error
    if (['EEXIST', 'ENOTDIR', 'EISDIR'].includes((error as NodeJS.ErrnoException).code ?? '')) {
      refuseArchive('a name appears twice, once as a file and once as a folder')
    }
    const code = (error as NodeJS.ErrnoException).code ?? ''
    if (code.startsWith('Z_') || code === 'ERR_STREAM_PREMATURE_CLOSE') {
      refuseArchive('it is not a complete gzip-compressed tar archive')
    }
    refuseArchive(`it is not a readable tar archive (${(error as Error).message})`)
  }
  if (entries === 0) refuseArchive('it is empty')

  const manifestFile = found.get(MANIFEST_NAME)
  if (!manifestFile) refuseArchive('it holds no manifest.json')
  if (manifestFile.size > MAX_DOCUMENT_BYTES) refuseArchive('manifest.json is too large')
  let parsed: unknown
  try {
    parsed = JSON.parse(await readFile(join(staging, MANIFEST_NAME), 'utf8'))
  } catch {
    refuseArchive('manifest.json is not valid JSON')
  }
  const manifest = checkManifest(parsed)
  for (const [name, expected] of Object.entries(manifest.files)) {
    const actual = found.get(name)
    if (!actual) refuseArchive(`${name.slice(0, 200)} is listed in the manifest but missing`)
    if (actual.size !== expected.size || actual.sha256 !== expected.sha256) {
      refuseArchive(`${name.slice(0, 200)} does not match its SHA-256 in the manifest`)
    }
  }
  for (const name of found.keys()) {
    if (name !== MANIFEST_NAME && !manifest.files[name]) {
      refuseArchive(`${name.slice(0, 200)} is not listed in the manifest`)
    }
  }
  return manifest
}

function drain(stream: Readable): Promise<void> {
  return new Promise((resolve, reject) => {
    stream.on('end', resolve)
    stream.on('error', reject)
    stream.resume()
  })
}

/** A JSON document of an unpacked (checked) archive, or `fallback` when it has none. */
export async function readDocument<T>(staging: string, name: string, fallback: T): Promise<T> {
  const path = join(staging, name)
  const info = await stat(path).catch(() => undefined)
  if (!info) return fallback
  if (!info.isFile() || info.size > MAX_DOCUMENT_BYTES) refuseArchive(`${name} is too large`)
  try {
    return JSON.parse(await readFile(path, 'utf8')) as T
  } catch {
    refuseArchive(`${name} is not valid JSON`)
  }
}
