/**
 * Just enough tar for the Docker Engine's archive API (GET/PUT
 * /containers/{id}/archive): ustar headers, PAX records for long names,
 * regular files, directories and symlinks.
 */

export interface TarEntry {
  name: string
  type: 'file' | 'directory' | 'symlink' | 'other'
  content?: Buffer
  size?: number
  mode?: number
  uid?: number
  gid?: number
  linkName?: string
}

const BLOCK = 512

function pad(buffer: Buffer): Buffer {
  const rest = buffer.length % BLOCK
  return rest === 0 ? buffer : Buffer.concat([buffer, Buffer.alloc(BLOCK - rest)])
}

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, '0') + '\0'
}

function header(fields: {
  name: string
  size: number
  mode: number
  uid: number
  gid: number
  typeflag: string
  linkName?: string
}): Buffer {
  const block = Buffer.alloc(BLOCK)
  block.write(fields.name.slice(0, 100), 0, 'utf8')
  block.write(octal(fields.mode & 0o7777, 8), 100, 'ascii')
  block.write(octal(fields.uid, 8), 108, 'ascii')
  block.write(octal(fields.gid, 8), 116, 'ascii')
  block.write(octal(fields.size, 12), 124, 'ascii')
  block.write(octal(Math.floor(Date.now() / 1000), 12), 136, 'ascii')
  block.write('        ', 148, 'ascii')
  block.write(fields.typeflag, 156, 'ascii')
  if (fields.linkName) block.write(fields.linkName.slice(0, 100), 157, 'utf8')
  block.write('ustar\0', 257, 'ascii')
  block.write('00', 263, 'ascii')
  let sum = 0
  for (const byte of block) sum += byte
  block.write(octal(sum, 7) + ' ', 148, 'ascii')
  return block
}

function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`
  let length = Buffer.byteLength(body) + 1
  while (String(length).length + Buffer.byteLength(body) !== length) {
    length = String(length).length + Buffer.byteLength(body)
  }
  return `${length}${body}`
}

/** Builds an archive; names are relative (`a/b.txt`), directories may end in `/`. */
export function createTar(entries: TarEntry[]): Buffer {
  const parts: Buffer[] = []
  for (const entry of entries) {
    const name = entry.type === 'directory' ? entry.name.replace(/\/?$/, '/') : entry.name
    const content = entry.type === 'file' ? (entry.content ?? Buffer.alloc(0)) : Buffer.alloc(0)
    const common = {
      mode: entry.mode ?? (entry.type === 'directory' ? 0o755 : 0o644),
      uid: entry.uid ?? 0,
      gid: entry.gid ?? 0,
    }
    if (Buffer.byteLength(name) > 100) {
      const pax = Buffer.from(paxRecord('path', name), 'utf8')
      parts.push(
        header({ ...common, name: 'PaxHeader', size: pax.length, typeflag: 'x' }),
        pad(pax)
      )
    }
    const typeflag = entry.type === 'directory' ? '5' : entry.type === 'symlink' ? '2' : '0'
    parts.push(
      header({ ...common, name, size: content.length, typeflag, linkName: entry.linkName }),
      pad(content)
    )
  }
  parts.push(Buffer.alloc(BLOCK * 2))
  return Buffer.concat(parts)
}

function readString(block: Buffer, start: number, length: number): string {
  const slice = block.subarray(start, start + length)
  const end = slice.indexOf(0)
  return slice.subarray(0, end < 0 ? slice.length : end).toString('utf8')
}

function readOctal(block: Buffer, start: number, length: number): number {
  const text = readString(block, start, length).trim()
  return text ? Number.parseInt(text, 8) : 0
}

function parsePax(data: Buffer): Record<string, string> {
  const records: Record<string, string> = {}
  let rest = data.toString('utf8')
  while (rest.length) {
    const space = rest.indexOf(' ')
    if (space < 0) break
    const length = Number(rest.slice(0, space))
    if (!length) break
    const record = rest.slice(space + 1, length - 1)
    const equals = record.indexOf('=')
    if (equals > 0) records[record.slice(0, equals)] = record.slice(equals + 1)
    rest = rest.slice(length)
  }
  return records
}

/** Reads every entry of an archive (contents of regular files included). */
export function parseTar(archive: Buffer): TarEntry[] {
  const entries: TarEntry[] = []
  let offset = 0
  let longName: string | undefined
  let longLink: string | undefined
  while (offset + BLOCK <= archive.length) {
    const block = archive.subarray(offset, offset + BLOCK)
    offset += BLOCK
    if (block.every((byte) => byte === 0)) break
    const size = readOctal(block, 124, 12)
    const typeflag = String.fromCharCode(block[156] || 48)
    const data = archive.subarray(offset, offset + size)
    offset += Math.ceil(size / BLOCK) * BLOCK

    if (typeflag === 'x') {
      const pax = parsePax(data)
      longName = pax.path ?? longName
      longLink = pax.linkpath ?? longLink
      continue
    }
    if (typeflag === 'L') {
      longName = readString(data, 0, data.length)
      continue
    }
    if (typeflag === 'K') {
      longLink = readString(data, 0, data.length)
      continue
    }
    if (typeflag === 'g') continue

    const prefix = readString(block, 345, 155)
    const shortName = readString(block, 0, 100)
    const name = (longName ?? (prefix ? `${prefix}/${shortName}` : shortName)).replace(/\/$/, '')
    const type =
      typeflag === '0' || typeflag === '\0' || typeflag === '7'
        ? 'file'
        : typeflag === '5'
          ? 'directory'
          : typeflag === '2'
            ? 'symlink'
            : 'other'
    entries.push({
      name,
      type,
      size,
      mode: readOctal(block, 100, 8),
      uid: readOctal(block, 108, 8),
      gid: readOctal(block, 116, 8),
      content: type === 'file' ? Buffer.from(data) : undefined,
      linkName: longLink ?? (readString(block, 157, 100) || undefined),
    })
    longName = undefined
    longLink = undefined
  }
  return entries
}
