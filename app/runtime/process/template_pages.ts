import { open, readdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { swapTablesIn } from '#runtime/process/file_identities'
import { joinImage, parseMessage, splitImage, writeVarint } from '#runtime/process/criu_images'

/**
 * A template copy's memory as CRIU's *parent* images (docs/runtime.md "New
 * agents from a template"): the copy holds only the pages it changes (the
 * template's marker and tokens replaced by the agent's, the file identity
 * table filled), and its pagemaps send every other page to the template's
 * own images through a `parent` link, as an incremental dump's do. An
 * OpenClaw gateway's images are ~1.1 GB: copying them was ~5 s of the
 * service's CPU and 1.1 GB written per new agent.
 *
 * Where those pages are is found once, when the template is installed
 * (findPatches): the template's images never change.
 */

export const PAGE = 4096
/** pagemap_entry.flags (CRIU's images/pagemap.proto): in the parent's images, in this one's. */
export const PE_PARENT = 1
export const PE_PRESENT = 4
/** pagemap_entry fields: vaddr, nr_pages (before CRIU 4: u32), in_parent, flags, nr_pages (u64). */
const VADDR = 1
const COMPAT_NR_PAGES = 2
const IN_PARENT = 3
const FLAGS = 4
const NR_PAGES = 5

/** The link CRIU follows from a dump to the one it is incremental on. */
export const PARENT_LINK = 'parent'

/** A value of the template's own a copy replaces (TemplateMeta's names). */
export type TemplateValue = 'marker' | 'gatewayToken' | 'modelProxyToken'

/** Where in a pages image a copy writes: a value of the template's, or a table page. */
export type PagePatch = { file: string; offset: number } & (
  { value: TemplateValue } | { table: number }
)

/** How much of a memory image is searched at once. */
const CHUNK = 64 * 1024 * 1024

/**
 * Every place in the pages images of `dir` where a copy writes: each of the
 * template's `values` wherever its memory holds it as written, and every
 * page of the file identity tables (file_identities.ts).
 */
export async function findPatches(
  dir: string,
  values: Record<TemplateValue, string>
): Promise<PagePatch[]> {
  const needles = Object.entries(values).map(([name, text]) => ({
    value: name as TemplateValue,
    bytes: Buffer.from(text),
  }))
  const overlap = Math.max(...needles.map(({ bytes }) => bytes.length)) - 1
  const chunk = Buffer.alloc(CHUNK + overlap)
  const patches: PagePatch[] = []
  for (const file of await readdir(dir)) {
    if (!/^pages-\d+\.img$/.test(file)) continue
    const handle = await open(join(dir, file), 'r')
    try {
      for (let offset = 0; ; offset += CHUNK) {
        const { bytesRead } = await handle.read(chunk, 0, chunk.length, offset)
        if (bytesRead === 0) break
        const view = chunk.subarray(0, bytesRead)
        for (const { value, bytes } of needles) {
          for (let at = view.indexOf(bytes); at !== -1; at = view.indexOf(bytes, at + 1)) {
            // A match starting in the overlap is the next chunk's.
            if (at >= CHUNK) break
            patches.push({ file, offset: offset + at, value })
          }
        }
        for (const { at, page } of swapTablesIn(view, CHUNK)) {
          patches.push({ file, offset: offset + at, table: page })
        }
        if (bytesRead < chunk.length) break
      }
    } finally {
      await handle.close()
    }
  }
  return patches
}

/** The pages image a pagemap's head (`pagemap_head.pages_id`) names. */
export function pagesImageOf(head: Buffer, pagemap: string): string {
  const pagesId = parseMessage(head).find((field) => field.number === 1)?.value
  if (typeof pagesId !== 'bigint') throw new Error(`${pagemap} names no pages image`)
  return `pages-${pagesId}.img`
}

export interface PagemapEntry {
  vaddr: bigint
  pages: number
  flags: number
}

export function readEntry(entry: Buffer): PagemapEntry {
  let vaddr: bigint | undefined
  let pages: number | undefined
  let flags: number | undefined
  let inParent = false
  for (const field of parseMessage(entry)) {
    const value = field.value as bigint
    if (field.number === VADDR) vaddr = value
    else if (field.number === NR_PAGES) pages = Number(value)
    else if (field.number === COMPAT_NR_PAGES) pages ??= Number(value) || undefined
    else if (field.number === IN_PARENT) inParent = value !== 0n
    else if (field.number === FLAGS) flags = Number(value)
    else throw new Error(`a pagemap entry field this code does not know (${field.number})`)
  }
  if (vaddr === undefined || pages === undefined) throw new Error('a pagemap entry without pages')
  return { vaddr, pages, flags: flags ?? (inParent ? PE_PARENT : PE_PRESENT) }
}

export function writeEntry({ vaddr, pages, flags }: PagemapEntry): Buffer {
  const varint = (number: number, value: bigint) =>
    Buffer.concat([writeVarint(BigInt(number << 3)), writeVarint(value)])
  return Buffer.concat([
    varint(VADDR, vaddr),
    varint(COMPAT_NR_PAGES, 0n),
    varint(FLAGS, BigInt(flags)),
    varint(NR_PAGES, BigInt(pages)),
  ])
}

/**
 * Writes at `target` (beside the copy's other images, with its `parent`
 * link to `templateDir`) each process's pagemap and pages image: the pages
 * `bytesAt` changes (their bytes, as the template's with the changes made)
 * in the copy, every other page in the parent. `bytesAt(file)`: for a pages
 * image, what to write where (file offsets).
 */
export async function writeIncrementalPages(
  templateDir: string,
  target: string,
  bytesAt: (file: string) => Array<{ offset: number; bytes: Buffer }>
): Promise<void> {
  for (const name of await readdir(templateDir)) {
    if (!/^pagemap-\d+\.img$/.test(name)) continue
    const { header, entries } = splitImage(await readFile(join(templateDir, name)))
    const [head, ...rest] = entries
    const file = pagesImageOf(head, name)
    const changes = bytesAt(file)
    const touched = new Set<number>()
    for (const { offset, bytes } of changes) {
      for (let page = Math.floor(offset / PAGE); page * PAGE < offset + bytes.length; page++) {
        touched.add(page)
      }
    }
    const source = await open(join(templateDir, file), 'r')
    const pages: Buffer[] = []
    const written: PagemapEntry[] = []
    try {
      // Each entry's pages follow the previous entry's in the pages image.
      let page = 0
      for (const raw of rest) {
        const entry = readEntry(raw)
        if (entry.flags & PE_PARENT) throw new Error('the template is itself incremental')
        if (!(entry.flags & PE_PRESENT)) {
          written.push(entry)
          continue
        }
        // Runs of pages kept (in the parent) and changed (here), in order.
        for (let first = 0; first < entry.pages;) {
          const changed = touched.has(page + first)
          let last = first
          while (last + 1 < entry.pages && touched.has(page + last + 1) === changed) last++
          const count = last - first + 1
          const vaddr = entry.vaddr + BigInt(first * PAGE)
          written.push({ vaddr, pages: count, flags: changed ? entry.flags : PE_PARENT })
          if (changed) {
            const run = Buffer.alloc(count * PAGE)
            await source.read(run, 0, run.length, (page + first) * PAGE)
            const start = (page + first) * PAGE
            for (const { offset, bytes } of changes) {
              if (offset + bytes.length <= start || offset >= start + run.length) continue
              const from = Math.max(0, start - offset)
              const to = Math.min(bytes.length, start + run.length - offset)
              bytes.copy(run, offset + from - start, from, to)
            }
            pages.push(run)
          }
          first = last + 1
        }
        page += entry.pages
      }
    } finally {
      await source.close()
    }
    await writeFile(join(target, file), Buffer.concat(pages))
    await writeFile(join(target, name), joinImage(header, [head, ...written.map(writeEntry)]))
  }
}
