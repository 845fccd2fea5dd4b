/**
 * Agent archives for the backups tests: unpack a downloaded one, pack
 * entries (hostile ones included) into a gzip tar, upload with multipart.
 */
import { createHash } from 'node:crypto'
import { Readable } from 'node:stream'
import { buffer as collect } from 'node:stream/consumers'
import { pipeline } from 'node:stream/promises'
import { createGunzip, gzipSync } from 'node:zlib'
import tar, { type EntryType } from 'tar-stream'

export interface RawEntry {
  name: string
  type?: EntryType
  content?: Buffer
  linkname?: string
}

/** Every entry of a gzip tar, with the contents of files. */
export async function unpackEntries(archive: Buffer): Promise<RawEntry[]> {
  const entries: RawEntry[] = []
  const extract = tar.extract()
  extract.on('entry', (header, stream, next) => {
    collect(stream).then((content) => {
      entries.push({
        name: header.name,
        type: header.type,
        content,
        linkname: header.linkname ?? undefined,
      })
      next()
    }, next)
  })
  await pipeline(Readable.from([archive]), createGunzip(), extract)
  return entries
}

/** A gzip tar of exactly these entries (names as given, unchecked). */
export async function packEntries(entries: RawEntry[]): Promise<Buffer> {
  const pack = tar.pack()
  const done = collect(pack)
  for (const entry of entries) {
    const type = entry.type ?? 'file'
    await new Promise<void>((resolve, reject) => {
      const callback = (error?: Error) => (error ? reject(error) : resolve())
      if (type === 'file') {
        pack.entry(
          { name: entry.name, type, mode: 0o644 },
          entry.content ?? Buffer.alloc(0),
          callback
        )
      } else {
        pack.entry({ name: entry.name, type, linkname: entry.linkname, mode: 0o755 }, callback)
      }
    })
  }
  pack.finalize()
  return gzipSync(await done)
}

export function sha256(content: Buffer): string {
  return createHash('sha256').update(content).digest('hex')
}

/**
 * The entries of a valid archive with `change` applied, the manifest's
 * file list made to match again (unless `keepManifest`): so the archive is
 * refused for what `change` did, not for a stale hash.
 */
export async function alteredArchive(
  archive: Buffer,
  change: (entries: RawEntry[]) => RawEntry[],
  options: { keepManifest?: boolean } = {}
): Promise<Buffer> {
  const entries = change(await unpackEntries(archive))
  const manifestEntry = entries.find((entry) => entry.name === 'manifest.json')
  if (manifestEntry && !options.keepManifest) {
    const manifest = JSON.parse(manifestEntry.content!.toString('utf8'))
    manifest.files = Object.fromEntries(
      entries
        .filter((entry) => (entry.type ?? 'file') === 'file' && entry.name !== 'manifest.json')
        .map((entry) => [
          entry.name,
          { size: entry.content!.length, sha256: sha256(entry.content!) },
        ])
    )
    manifestEntry.content = Buffer.from(JSON.stringify(manifest))
  }
  return packEntries(entries)
}

/** POST /agents/import with the archive as multipart field `archive`. */
export async function uploadArchive(baseUrl: string, token: string, archive: Buffer) {
  const form = new FormData()
  form.append('archive', new Blob([new Uint8Array(archive)]), 'agent.tar.gz')
  const response = await fetch(`${baseUrl}/agents/import`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
    body: form,
  })
  const text = await response.text()
  let body: any
  try {
    body = JSON.parse(text)
  } catch {
    body = text
  }
  return { status: response.status, body }
}

/** GET .../download: the archive's bytes and headers. */
export async function downloadArchive(baseUrl: string, token: string, path: string) {
  const response = await fetch(`${baseUrl}${path}`, {
    headers: { authorization: `Bearer ${token}` },
  })
  return {
    status: response.status,
    headers: response.headers,
    bytes: Buffer.from(await response.arrayBuffer()),
  }
}
