import { open, readFile, readdir, rename, rm, stat, symlink, writeFile } from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import { join, relative } from 'node:path'
import { joinImage, splitImage } from '#runtime/process/criu_images'
import {
  PAGE,
  PARENT_LINK,
  PE_PARENT,
  PE_PRESENT,
  pagesImageOf,
  readEntry,
  writeEntry,
  type PagemapEntry,
} from '#runtime/process/template_pages'

/**
 * A sleeping agent's checkpoint as a delta on the template it started from
 * (docs/runtime.md "Sleep and wake: checkpoints as deltas"). CRIU dumps
 * incrementally only with the kernel's soft-dirty tracking, which this
 * host lacks; so after its full dump, every page whose bytes equal the
 * template's page at the same address, in the same-numbered process's
 * images, is handed to the template's images (CRIU's parent images, as an
 * incremental dump's pages are), and only the others stay to be compressed.
 * An OpenClaw gateway started from its template and put to sleep: 81-86 %
 * of its 1.1 GB were the template's, byte for byte. Bytes decide, not
 * history, so whatever the agent did since its start, the restore gives
 * back the memory dumped. The template must stay as it was:
 * `templateIdentity` is recorded and checked before a restore.
 */

/** Pages compared at once (16 MB of the dump and as much of the template). */
const BATCH_PAGES = 4096

/** A run of present pages in the template's pages image. */
interface TemplateRun {
  vaddr: bigint
  pages: number
  /** Its first page's index in the pages image. */
  first: number
}

/** The template's present pages of one process, or undefined when it has none to offer. */
async function templateRuns(
  templateDir: string,
  pagemap: string
): Promise<{ file: string; runs: TemplateRun[] } | undefined> {
  const image = await readFile(join(templateDir, pagemap)).catch(() => undefined)
  if (!image) return undefined
  const [head, ...rest] = splitImage(image).entries
  const runs: TemplateRun[] = []
  let page = 0
  for (const raw of rest) {
    const entry = readEntry(raw)
    // A template is a full dump; anything else is no base to compare with.
    if (entry.flags & PE_PARENT) return undefined
    if (!(entry.flags & PE_PRESENT)) continue
    runs.push({ vaddr: entry.vaddr, pages: entry.pages, first: page })
    page += entry.pages
  }
  return { file: pagesImageOf(head, pagemap), runs }
}

/** The run holding `vaddr`, or the index of the first run after it (negated, less one). */
function runAt(runs: TemplateRun[], vaddr: bigint): number {
  let low = 0
  let high = runs.length - 1
  while (low <= high) {
    const middle = (low + high) >> 1
    const run = runs[middle]
    if (vaddr < run.vaddr) high = middle - 1
    else if (vaddr >= run.vaddr + BigInt(run.pages * PAGE)) low = middle + 1
    else return middle
  }
  return -low - 1
}

/** Reads `length` bytes at `position`; an image shorter than its pagemap says is refused. */
async function readWhole(handle: FileHandle, into: Buffer, length: number, position: number) {
  const { bytesRead } = await handle.read(into, 0, length, position)
  if (bytesRead !== length) throw new Error('a pages image is shorter than its pagemap')
}

/** For each of `count` pages from `vaddr` (bytes in `dumped`): is it the template's, byte for byte. */
async function sameAsTemplate(
  template: { handle: FileHandle; runs: TemplateRun[] },
  vaddr: bigint,
  count: number,
  dumped: Buffer,
  scratch: Buffer
): Promise<Uint8Array> {
  const same = new Uint8Array(count)
  for (let page = 0; page < count;) {
    const at = vaddr + BigInt(page * PAGE)
    const found = runAt(template.runs, at)
    if (found < 0) {
      // Not in the template: up to where its next run begins.
      const next = template.runs[-found - 1]
      const gap = next ? Number((next.vaddr - at) / BigInt(PAGE)) : count - page
      page += Math.max(1, Math.min(gap, count - page))
      continue
    }
    const run = template.runs[found]
    const into = Number((at - run.vaddr) / BigInt(PAGE))
    const pages = Math.min(run.pages - into, count - page)
    const bytes = pages * PAGE
    await readWhole(template.handle, scratch, bytes, (run.first + into) * PAGE)
    for (let i = 0; i < pages; i++) {
      // Compared in place (no view made per page): a gateway's dump has ~270,000 pages.
      const offset = (page + i) * PAGE
      same[page + i] = dumped.compare(scratch, i * PAGE, (i + 1) * PAGE, offset, offset + PAGE)
        ? 0
        : 1
    }
    page += pages
  }
  return same
}

/**
 * Rewrites one process's pagemap and pages image of the dump in `dir`
 * (into `*.delta` files beside them): the pages the template holds as
 * they are become parent pages. Answers how many pages stayed, of how many.
 */
async function deltaOfProcess(
  dir: string,
  pagemap: string,
  template: { dir: string; file: string; runs: TemplateRun[] }
): Promise<{ kept: number; total: number; files: string[] }> {
  const { header, entries } = splitImage(await readFile(join(dir, pagemap)))
  const [head, ...rest] = entries
  const file = pagesImageOf(head, pagemap)
  const dump = await open(join(dir, file), 'r')
  const parent = await open(join(template.dir, template.file), 'r')
  const out = await open(join(dir, `${file}.delta`), 'w', 0o644)
  const dumped = Buffer.alloc(BATCH_PAGES * PAGE)
  const scratch = Buffer.alloc(BATCH_PAGES * PAGE)
  // A batch's kept pages, written at once (one write per run cost more CPU than the comparing).
  const keptBytes = Buffer.alloc(BATCH_PAGES * PAGE)
  const written: PagemapEntry[] = []
  let kept = 0
  let total = 0
  try {
    let page = 0
    for (const raw of rest) {
      const entry = readEntry(raw)
      if (!(entry.flags & PE_PRESENT)) {
        written.push(entry)
        continue
      }
      for (let first = 0; first < entry.pages; first += BATCH_PAGES) {
        const count = Math.min(BATCH_PAGES, entry.pages - first)
        const vaddr = entry.vaddr + BigInt(first * PAGE)
        await readWhole(dump, dumped, count * PAGE, (page + first) * PAGE)
        const same = await sameAsTemplate(
          { handle: parent, runs: template.runs },
          vaddr,
          count,
          dumped,
          scratch
        )
        // Runs of pages left to the template and kept here, in order.
        let keptInBatch = 0
        for (let from = 0; from < count;) {
          let to = from + 1
          while (to < count && same[to] === same[from]) to++
          const runVaddr = vaddr + BigInt(from * PAGE)
          const pages = to - from
          if (same[from]) {
            written.push({ vaddr: runVaddr, pages, flags: PE_PARENT })
          } else {
            written.push({ vaddr: runVaddr, pages, flags: entry.flags })
            dumped.copy(keptBytes, keptInBatch * PAGE, from * PAGE, to * PAGE)
            keptInBatch += pages
          }
          from = to
        }
        if (keptInBatch > 0) await out.write(keptBytes, 0, keptInBatch * PAGE)
        kept += keptInBatch
        total += count
      }
      page += entry.pages
    }
  } finally {
    await Promise.all([dump.close(), parent.close(), out.close()])
  }
  await writeFile(
    join(dir, `${pagemap}.delta`),
    joinImage(header, [head, ...written.map(writeEntry)]),
    { mode: 0o644 }
  )
  return { kept, total, files: [file, pagemap] }
}

/**
 * What identifies the template's images as they are: a rebuild or a
 * removal changes it (new files, new inodes).
 */
export async function templateIdentity(templateDir: string): Promise<string> {
  const entries = await readdir(templateDir)
  const names = entries.filter((name) => /^(pages|pagemap)-\d+\.img$/.test(name)).sort()
  const parts = await Promise.all(
    names.map(async (name) => {
      const info = await stat(join(templateDir, name))
      return `${name}:${info.ino}:${info.size}:${info.mtimeMs}`
    })
  )
  return parts.join(',')
}

/**
 * Turns the full dump in `dir` into a delta on the template images in
 * `templateDir` (a `parent` link to them, parent pages in its pagemaps).
 * Undefined, the dump left whole, when no process of it has a counterpart
 * there or the template changed meanwhile; throws, the dump left whole,
 * when the images could not be read.
 */
export async function writeAsDelta(
  dir: string,
  templateDir: string
): Promise<{ templateIdentity: string; keptPages: number; totalPages: number } | undefined> {
  const identity = await templateIdentity(templateDir)
  const rewritten: string[] = []
  let keptPages = 0
  let totalPages = 0
  const dropDeltas = async () => {
    const entries = await readdir(dir)
    const deltas = entries.filter((name) => name.endsWith('.delta'))
    await Promise.all(deltas.map((name) => rm(join(dir, name), { force: true })))
  }
  try {
    for (const pagemap of await readdir(dir)) {
      if (!/^pagemap-\d+\.img$/.test(pagemap)) continue
      const runs = await templateRuns(templateDir, pagemap)
      if (!runs) continue
      const result = await deltaOfProcess(dir, pagemap, { dir: templateDir, ...runs })
      rewritten.push(...result.files)
      keptPages += result.kept
      totalPages += result.total
    }
    if (rewritten.length === 0 || (await templateIdentity(templateDir)) !== identity) {
      await dropDeltas()
      return undefined
    }
  } catch (error) {
    await dropDeltas()
    throw error
  }
  // The link first: a pagemap naming parent pages is never without it.
  await symlink(relative(dir, templateDir), join(dir, PARENT_LINK))
  for (const name of rewritten) await rename(join(dir, `${name}.delta`), join(dir, name))
  return { templateIdentity: identity, keptPages, totalPages }
}
