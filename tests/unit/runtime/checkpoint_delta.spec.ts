import {
  copyFile,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  readlink,
  rename,
  rm,
  writeFile,
} from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { test } from '@japa/runner'
import { joinImage, splitImage, writeVarint } from '#runtime/process/criu_images'
import { pageDeltaProgram, templateIdentity, writeAsDelta } from '#runtime/process/checkpoint_delta'
import {
  PAGE,
  PARENT_LINK,
  PE_PARENT,
  PE_PRESENT,
  readEntry,
  writeEntry,
  type PagemapEntry,
} from '#runtime/process/template_pages'

/**
 * A dump as a delta on its template's images (checkpoint_delta.ts), on
 * images written here in CRIU's format: the memory read back through the
 * delta and the template's images is the dump's, page for page.
 */

/** IMG_COMMON_MAGIC then the pagemap's own magic. */
const HEADER = Buffer.from([0x19, 0x43, 0x56, 0x54, 0x68, 0x22, 0x16, 0x56])

/** A page filled with `seed` (distinct seeds, distinct pages). */
function page(seed: number): Buffer {
  const bytes = Buffer.alloc(PAGE)
  for (let i = 0; i < PAGE; i += 4) bytes.writeUInt32LE((seed * 2654435761 + i) >>> 0, i)
  return bytes
}

/** One process's memory: runs of pages by address. */
type Memory = Array<{ vaddr: bigint; pages: Buffer[] }>

/** Writes `memory` as the pagemap and pages image of process `pid` (pages id = pid) in `dir`. */
async function writeProcess(dir: string, pid: number, memory: Memory) {
  const head = Buffer.concat([writeVarint(BigInt(1 << 3)), writeVarint(BigInt(pid))])
  const entries = memory.map(({ vaddr, pages }) =>
    writeEntry({ vaddr, pages: pages.length, flags: PE_PRESENT })
  )
  await writeFile(join(dir, `pagemap-${pid}.img`), joinImage(HEADER, [head, ...entries]))
  await writeFile(join(dir, `pages-${pid}.img`), Buffer.concat(memory.flatMap((run) => run.pages)))
}

/** The present pages of process `pid` in `dir` by address, parent pages read through its link. */
async function readProcess(dir: string, pid: number): Promise<Map<bigint, Buffer>> {
  const { entries } = splitImage(await readFile(join(dir, `pagemap-${pid}.img`)))
  const pages = await readFile(join(dir, `pages-${pid}.img`))
  const memory = new Map<bigint, Buffer>()
  let parent: Map<bigint, Buffer> | undefined
  let at = 0
  for (const raw of entries.slice(1)) {
    const entry: PagemapEntry = readEntry(raw)
    for (let i = 0; i < entry.pages; i++) {
      const vaddr = entry.vaddr + BigInt(i * PAGE)
      if (entry.flags & PE_PARENT) {
        parent ??= await readProcess(resolve(dir, await readlink(join(dir, PARENT_LINK))), pid)
        const bytes = parent.get(vaddr)
        if (!bytes) throw new Error(`page ${vaddr} is in no parent`)
        memory.set(vaddr, bytes)
      } else {
        memory.set(vaddr, pages.subarray(at, at + PAGE))
        at += PAGE
      }
    }
  }
  return memory
}

function asMap(memory: Memory): Map<bigint, Buffer> {
  const map = new Map<bigint, Buffer>()
  for (const { vaddr, pages } of memory) {
    pages.forEach((bytes, i) => map.set(vaddr + BigInt(i * PAGE), bytes))
  }
  return map
}

test.group('Runtime / checkpoints as deltas on their template', (group) => {
  let root: string
  let templateDir: string
  let dumpDir: string
  /** The page comparison (page_delta.c), compiled as the service does. */
  let program: string
  group.setup(async () => {
    const compiled = await mkdtemp(join(tmpdir(), 'checkpoint-delta-program-'))
    const built = pageDeltaProgram(compiled)
    if ('reason' in built) throw new Error(built.reason)
    program = built.path
    return () => rm(compiled, { recursive: true, force: true })
  })
  group.each.setup(async () => {
    root = await mkdtemp(join(tmpdir(), 'checkpoint-delta-'))
    templateDir = join(root, '.templates', 'key')
    dumpDir = join(root, 'agent', 'checkpoint.partial')
    await mkdir(templateDir, { recursive: true })
    await mkdir(dumpDir, { recursive: true })
    return () => rm(root, { recursive: true, force: true })
  })

  const base = 0x7f00_0000_0000n
  const template: Memory = [
    { vaddr: base, pages: [page(1), page(2), page(3), page(4)] },
    { vaddr: base + 0x10_0000n, pages: [page(5), page(6)] },
  ]

  test('pages the template holds as they are go to it; changed, moved and new pages stay', async ({
    assert,
  }) => {
    await writeProcess(templateDir, 1, template)
    // Page 2 changed, a page moved to another address, a new run, and a process the
    // template has no images of.
    const dumped: Memory = [
      { vaddr: base, pages: [page(1), page(99), page(3), page(4)] },
      { vaddr: base + 0x10_0000n, pages: [page(6), page(6)] },
      { vaddr: base + 0x20_0000n, pages: [page(7)] },
    ]
    const other: Memory = [{ vaddr: base, pages: [page(1)] }]
    await writeProcess(dumpDir, 1, dumped)
    await writeProcess(dumpDir, 2, other)
    const before = await readFile(join(dumpDir, 'pages-1.img'))

    const delta = await writeAsDelta(dumpDir, templateDir, program)
    assert.deepEqual(
      { kept: delta?.keptPages, total: delta?.totalPages },
      { kept: 3, total: 7 },
      'page 2, the moved page and the new run stay'
    )
    assert.equal(delta?.templateIdentity, await templateIdentity(templateDir))
    assert.equal(
      resolve(dumpDir, await readlink(join(dumpDir, PARENT_LINK))),
      templateDir,
      'linked to its template'
    )
    const after = await readFile(join(dumpDir, 'pages-1.img'))
    assert.equal(after.length, 3 * PAGE)
    assert.isBelow(after.length, before.length)

    // Read back through the template: the same memory, page for page.
    const read = await readProcess(dumpDir, 1)
    const expected = asMap(dumped)
    assert.equal(read.size, expected.size)
    for (const [vaddr, bytes] of expected) {
      assert.isTrue(read.get(vaddr)?.equals(bytes), `page at ${vaddr.toString(16)}`)
    }
    // The process without a counterpart is left whole.
    const untouched = await readProcess(dumpDir, 2)
    assert.isTrue(untouched.get(base)?.equals(page(1)))
    const whole = await readFile(join(dumpDir, 'pages-2.img'))
    assert.equal(whole.length, PAGE)
  })

  test('no process with a counterpart: the dump is left whole, with no link', async ({
    assert,
  }) => {
    await writeProcess(templateDir, 1, template)
    await writeProcess(dumpDir, 5, template)
    const before = await readFile(join(dumpDir, 'pages-5.img'))
    assert.isUndefined(await writeAsDelta(dumpDir, templateDir, program))
    const after = await readFile(join(dumpDir, 'pages-5.img'))
    assert.isTrue(after.equals(before))
    await assert.rejects(() => readlink(join(dumpDir, PARENT_LINK)))
  })

  test('a pages image shorter than its pagemap is refused: the dump is left whole', async ({
    assert,
  }) => {
    await writeProcess(templateDir, 1, template)
    await writeProcess(dumpDir, 1, template)
    const whole = await readFile(join(dumpDir, 'pages-1.img'))
    await writeFile(join(dumpDir, 'pages-1.img'), whole.subarray(0, 3 * PAGE))
    await assert.rejects(
      () => writeAsDelta(dumpDir, templateDir, program),
      /shorter than its pagemap/
    )
    const left = await readdir(dumpDir)
    assert.sameMembers(left, ['pagemap-1.img', 'pages-1.img'], 'no delta files, no link')
  })

  test('a template image shorter than its pagemap says fails the comparison: the dump is left whole', async ({
    assert,
  }) => {
    await writeProcess(templateDir, 1, template)
    await writeProcess(dumpDir, 1, template)
    const whole = await readFile(join(templateDir, 'pages-1.img'))
    await writeFile(join(templateDir, 'pages-1.img'), whole.subarray(0, 2 * PAGE))
    await assert.rejects(
      () => writeAsDelta(dumpDir, templateDir, program),
      /page comparison failed \(2\): .*outside an image/
    )
    assert.sameMembers(await readdir(dumpDir), ['pagemap-1.img', 'pages-1.img'])
  })

  test('a rebuilt template has another identity (a delta on the old one is never restored on it)', async ({
    assert,
  }) => {
    await writeProcess(templateDir, 1, template)
    const first = await templateIdentity(templateDir)
    assert.equal(await templateIdentity(templateDir), first, 'stable while unchanged')
    // A rebuild writes new files and moves them in place.
    await copyFile(join(templateDir, 'pages-1.img'), join(root, 'rebuilt.img'))
    await rename(join(root, 'rebuilt.img'), join(templateDir, 'pages-1.img'))
    assert.notEqual(await templateIdentity(templateDir), first)
  })
})
