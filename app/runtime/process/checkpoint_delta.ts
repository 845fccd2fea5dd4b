import { spawn } from 'node:child_process'
import { readFile, readdir, rename, rm, stat, symlink, writeFile } from 'node:fs/promises'
import { join, relative } from 'node:path'
import { compiledC, type Compiled } from '#runtime/process/compiled_c'
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
 * `templateIdentity` is recorded and checked before a restore. The pages
 * are compared by a small program (page_delta.c, compiled with gcc like the
 * file identity shim) that maps both images: Node's reads copied the 2.2 GB
 * of a gateway's dump and template through the threadpool.
 */

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

/** The page comparison's program (page_delta.c), compiled into `dir` (the runtime cache). */
export function pageDeltaProgram(dir: string): Compiled {
  return compiledC(dir, 'page_delta.c', { name: 'page-delta' })
}

/**
 * Appends to `into`, as (dump page, template page, count) triples, where the
 * template holds pages at the addresses of `count` dump pages from `vaddr`
 * (the first of them page `first` of the dump's pages image).
 */
function counterparts(
  runs: TemplateRun[],
  vaddr: bigint,
  count: number,
  first: number,
  into: number[]
) {
  for (let page = 0; page < count;) {
    const at = vaddr + BigInt(page * PAGE)
    const found = runAt(runs, at)
    if (found < 0) {
      // Not in the template: up to where its next run begins.
      const next = runs[-found - 1]
      const gap = next ? Number((next.vaddr - at) / BigInt(PAGE)) : count - page
      page += Math.max(1, Math.min(gap, count - page))
      continue
    }
    const run = runs[found]
    const offset = Number((at - run.vaddr) / BigInt(PAGE))
    const pages = Math.min(run.pages - offset, count - page)
    into.push(first + page, run.first + offset, pages)
    page += pages
  }
}

/**
 * Runs the page comparison (page_delta.c, at nice 10 like zstd): the kept
 * pages written to `out`, one byte per dump page answered (1: the template's).
 */
function comparePages(
  program: string,
  images: { dump: string; template: string; out: string },
  triples: Uint32Array,
  pages: number
): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const args = ['-n', '10', program, images.dump, images.template, images.out]
    const child = spawn('/usr/bin/nice', args, { stdio: ['pipe', 'pipe', 'pipe'] })
    const chunks: Buffer[] = []
    let errors = ''
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk))
    child.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()))
    child.once('error', reject)
    child.once('close', (code) => {
      const same = Buffer.concat(chunks)
      if (code === 0 && same.length === pages) return resolve(same)
      reject(new Error(`the page comparison failed (${code}): ${errors.trim().slice(0, 300)}`))
    })
    // A program that exits early closes its input: its exit code says why.
    child.stdin.on('error', () => undefined)
    child.stdin.end(Buffer.from(triples.buffer, triples.byteOffset, triples.byteLength))
  })
}

/**
 * Rewrites one process's pagemap and pages image of the dump in `dir`
 * (into `*.delta` files beside them): the pages the template holds as
 * they are become parent pages. Answers how many pages stayed, of how many.
 */
async function deltaOfProcess(
  dir: string,
  pagemap: string,
  template: { dir: string; file: string; runs: TemplateRun[] },
  program: string
): Promise<{ kept: number; total: number; files: string[] }> {
  const { header, entries } = splitImage(await readFile(join(dir, pagemap)))
  const [head, ...rest] = entries
  const file = pagesImageOf(head, pagemap)
  const parsed = rest.map(readEntry)
  const triples: number[] = []
  let total = 0
  for (const entry of parsed) {
    if (!(entry.flags & PE_PRESENT)) continue
    counterparts(template.runs, entry.vaddr, entry.pages, total, triples)
    total += entry.pages
  }
  const { size } = await stat(join(dir, file))
  if (size !== total * PAGE) {
    throw new Error(
      `a pages image is ${size < total * PAGE ? 'shorter' : 'longer'} than its pagemap`
    )
  }
  const same = await comparePages(
    program,
    {
      dump: join(dir, file),
      template: join(template.dir, template.file),
      out: join(dir, `${file}.delta`),
    },
    Uint32Array.from(triples),
    total
  )
  // Runs of pages left to the template and kept here, in order (as the program wrote them).
  const written: PagemapEntry[] = []
  let kept = 0
  let page = 0
  for (const entry of parsed) {
    if (!(entry.flags & PE_PRESENT)) {
      written.push(entry)
      continue
    }
    for (let from = 0; from < entry.pages;) {
      let to = from + 1
      while (to < entry.pages && same[page + to] === same[page + from]) to++
      const vaddr = entry.vaddr + BigInt(from * PAGE)
      if (same[page + from]) {
        written.push({ vaddr, pages: to - from, flags: PE_PARENT })
      } else {
        written.push({ vaddr, pages: to - from, flags: entry.flags })
        kept += to - from
      }
      from = to
    }
    page += entry.pages
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
  templateDir: string,
  program: string
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
      const result = await deltaOfProcess(dir, pagemap, { dir: templateDir, ...runs }, program)
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
