import { inflateRawSync } from 'node:zlib'

/**
 * Reads a ZIP archive into { name: content } by its central directory
 * (stored and deflated entries), enough to check what an export holds.
 */
export function readZip(archive: Buffer): Record<string, Buffer> {
  const eocd = archive.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]))
  if (eocd < 0) throw new Error('Not a ZIP archive: no end of central directory')
  const entries = archive.readUInt16LE(eocd + 10)
  let offset = archive.readUInt32LE(eocd + 16)

  const files: Record<string, Buffer> = {}
  for (let i = 0; i < entries; i++) {
    if (archive.readUInt32LE(offset) !== 0x02014b50) throw new Error('Bad central directory')
    const method = archive.readUInt16LE(offset + 10)
    const compressedSize = archive.readUInt32LE(offset + 20)
    const nameLength = archive.readUInt16LE(offset + 28)
    const extraLength = archive.readUInt16LE(offset + 30)
    const commentLength = archive.readUInt16LE(offset + 32)
    const localOffset = archive.readUInt32LE(offset + 42)
    const name = archive.toString('utf8', offset + 46, offset + 46 + nameLength)

    const localNameLength = archive.readUInt16LE(localOffset + 26)
    const localExtraLength = archive.readUInt16LE(localOffset + 28)
    const start = localOffset + 30 + localNameLength + localExtraLength
    const data = archive.subarray(start, start + compressedSize)
    files[name] = method === 0 ? Buffer.from(data) : inflateRawSync(data)

    offset += 46 + nameLength + extraLength + commentLength
  }
  return files
}
