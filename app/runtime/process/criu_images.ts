import { readFile, readdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'

/**
 * Edits of CRIU image files, for a template checkpoint restored as another
 * agent (app/runtime/process/template.ts): the template ran under a uid of
 * its own, the agent runs under its own, and CRIU restores the credentials
 * its images hold. Only the credentials are changed; every other byte of the
 * images is copied as it is (fields this code does not know included), so a
 * newer CRIU's images survive the edit.
 *
 * Format (CRIU's images/*.proto and criu/image.c): a magic (u32, two for
 * most images), then entries, each a u32 little-endian length and a
 * protobuf message. `core-<tid>.img` holds one CoreEntry per thread:
 * CoreEntry.thread_core (5) -> ThreadCoreEntry.creds (10) -> CredsEntry
 * uid, gid, euid, egid, suid, sgid, fsuid, fsgid (1-8, uint32).
 */

/** CRIU's common magic: images that carry it have a second, image-specific one. */
const IMG_COMMON_MAGIC = 0x54564319
const IMG_SERVICE_MAGIC = 0x55105940

const CORE_THREAD_CORE = 5
const THREAD_CORE_CREDS = 10
const CREDS_UIDS = new Set([1, 3, 5, 7])
const CREDS_GIDS = new Set([2, 4, 6, 8])

export interface Field {
  number: number
  wireType: number
  /** Varint fields: the value; length-delimited: the bytes; fixed: the raw bytes. */
  value: bigint | Buffer
}

function readVarint(buffer: Buffer, offset: number): [bigint, number] {
  let result = 0n
  let shift = 0n
  for (;;) {
    if (offset >= buffer.length) throw new Error('truncated varint')
    const byte = buffer[offset++]
    result |= BigInt(byte & 0x7f) << shift
    if ((byte & 0x80) === 0) return [result, offset]
    shift += 7n
  }
}

export function writeVarint(value: bigint): Buffer {
  const bytes: number[] = []
  let rest = value
  do {
    let byte = Number(rest & 0x7fn)
    rest >>= 7n
    if (rest > 0n) byte |= 0x80
    bytes.push(byte)
  } while (rest > 0n)
  return Buffer.from(bytes)
}

export function parseMessage(buffer: Buffer): Field[] {
  const fields: Field[] = []
  let offset = 0
  while (offset < buffer.length) {
    const [tag, afterTag] = readVarint(buffer, offset)
    const number = Number(tag >> 3n)
    const wireType = Number(tag & 7n)
    offset = afterTag
    if (wireType === 0) {
      const [value, next] = readVarint(buffer, offset)
      fields.push({ number, wireType, value })
      offset = next
    } else if (wireType === 2) {
      const [length, next] = readVarint(buffer, offset)
      const end = next + Number(length)
      if (end > buffer.length) throw new Error('truncated field')
      fields.push({ number, wireType, value: buffer.subarray(next, end) })
      offset = end
    } else if (wireType === 1 || wireType === 5) {
      const size = wireType === 1 ? 8 : 4
      fields.push({ number, wireType, value: buffer.subarray(offset, offset + size) })
      offset += size
    } else {
      throw new Error(`unsupported wire type ${wireType}`)
    }
  }
  return fields
}

function encodeMessage(fields: Field[]): Buffer {
  const parts: Buffer[] = []
  for (const field of fields) {
    parts.push(writeVarint((BigInt(field.number) << 3n) | BigInt(field.wireType)))
    if (field.wireType === 0) parts.push(writeVarint(field.value as bigint))
    else if (field.wireType === 2) {
      const bytes = field.value as Buffer
      parts.push(writeVarint(BigInt(bytes.length)), bytes)
    } else parts.push(field.value as Buffer)
  }
  return Buffer.concat(parts)
}

/** Applies `edit` to the length-delimited sub-message `number` of `message`. */
function editNested(message: Buffer, number: number, edit: (inner: Buffer) => Buffer): Buffer {
  const fields = parseMessage(message)
  for (const field of fields) {
    if (field.number === number && field.wireType === 2) field.value = edit(field.value as Buffer)
  }
  return encodeMessage(fields)
}

export interface IdentityChange {
  from: { uid: number; gid: number }
  to: { uid: number; gid: number }
}

/**
 * The credentials of one CredsEntry, changed: each real, effective, saved and
 * filesystem id that was the template's becomes the agent's. Any other id
 * (root's, or one the framework switched to) is refused: it cannot be
 * carried over safely.
 */
function editCreds(creds: Buffer, change: IdentityChange): Buffer {
  const fields = parseMessage(creds)
  for (const field of fields) {
    if (field.wireType !== 0) continue
    const ids = CREDS_UIDS.has(field.number)
      ? ([change.from.uid, change.to.uid] as const)
      : CREDS_GIDS.has(field.number)
        ? ([change.from.gid, change.to.gid] as const)
        : undefined
    if (!ids) continue
    if (field.value !== BigInt(ids[0])) {
      throw new Error(`a thread runs as id ${field.value}, not the template's ${ids[0]}`)
    }
    field.value = BigInt(ids[1])
  }
  return encodeMessage(fields)
}

/** The entries of an image file after its magic. */
export function splitImage(image: Buffer): { header: Buffer; entries: Buffer[] } {
  const first = image.readUInt32LE(0)
  const headerSize = first === IMG_COMMON_MAGIC || first === IMG_SERVICE_MAGIC ? 8 : 4
  const entries: Buffer[] = []
  let offset = headerSize
  while (offset < image.length) {
    const size = image.readUInt32LE(offset)
    offset += 4
    if (offset + size > image.length) throw new Error('truncated entry')
    entries.push(image.subarray(offset, offset + size))
    offset += size
  }
  return { header: image.subarray(0, headerSize), entries }
}

export function joinImage(header: Buffer, entries: Buffer[]): Buffer {
  const parts: Buffer[] = [header]
  for (const entry of entries) {
    const size = Buffer.alloc(4)
    size.writeUInt32LE(entry.length)
    parts.push(size, entry)
  }
  return Buffer.concat(parts)
}

/**
 * Rewrites the credentials of every thread in the checkpoint at `dir` from
 * the template's uid and gid to the agent's. Throws when an image is not
 * what it should be (the caller then boots the agent instead).
 */
export async function rewriteIdentity(dir: string, change: IdentityChange): Promise<number> {
  const files = await readdir(dir)
  const names = files.filter((name) => /^core-\d+\.img$/.test(name))
  if (names.length === 0) throw new Error('no core images')
  for (const name of names) {
    const file = join(dir, name)
    const { header, entries } = splitImage(await readFile(file))
    const edited = entries.map((entry) =>
      editNested(entry, CORE_THREAD_CORE, (threadCore) =>
        editNested(threadCore, THREAD_CORE_CREDS, (creds) => editCreds(creds, change))
      )
    )
    await writeFile(file, joinImage(header, edited))
  }
  return names.length
}
