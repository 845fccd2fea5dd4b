import { spawn } from 'node:child_process'
import { closeSync, openSync, readFileSync, readSync, writeSync } from 'node:fs'
import { lstat, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import {
  SWAP_TABLE_BODY,
  fileIdentityShim,
  identitySwaps,
  recordIdentities,
  swapTablePage,
  swapTablesIn,
  type FileIdentity,
} from '#runtime/process/file_identities'

/**
 * File identities across a template start (app/runtime/process/file_identities.ts):
 * the swaps are a permutation even when an agent's file was given one of the
 * template's freed inode numbers, and the preloaded library (compiled here
 * with gcc) answers Node.js's stat calls with them once its table is filled
 * (here through the live process's memory, as a restore does through its
 * images).
 */
const key = ({ dev, ino }: FileIdentity) => `${dev}:${ino}`

async function identityOf(path: string): Promise<FileIdentity> {
  const info = await lstat(path, { bigint: true })
  return { dev: info.dev, ino: info.ino }
}

/** What the shim shows for `identity`, by the table (one lookup, as the shim does). */
function shownBy(swaps: Array<[FileIdentity, FileIdentity]>, identity: FileIdentity) {
  const swap = swaps.find(([from]) => key(from) === key(identity))
  return key(swap ? swap[1] : identity)
}

test.group('Runtime / file identities of a template start', (group) => {
  let dir: string
  group.each.setup(async () => {
    dir = await mkdtemp(join(tmpdir(), 'file-identities-'))
    await mkdir(join(dir, 'state'))
    for (const name of ['a', 'b', 'c']) await writeFile(join(dir, 'state', name), name)
    return () => rm(dir, { recursive: true, force: true })
  })

  test('the swaps are a permutation, also where an agent file has a template inode number', async ({
    assert,
  }) => {
    const [a, b, c] = await Promise.all(
      ['a', 'b', 'c'].map((n) => identityOf(join(dir, 'state', n)))
    )
    const gone = { dev: a.dev, ino: 4_000_000_001n }
    const entry = (path: string, identity: FileIdentity) => ({
      folder: 'state',
      path,
      kind: 'file' as const,
      dev: String(identity.dev),
      ino: String(identity.ino),
    })
    // The template's `a` had the inode number the agent's `b` has now; its `b` one nobody has;
    // its `c` the agent's `c`'s (nothing to swap); its `d` the agent does not have.
    const recorded = [
      entry('a', b),
      entry('b', gone),
      entry('c', c),
      entry('d', { dev: a.dev, ino: 4_000_000_002n }),
    ]
    const swaps = await identitySwaps(recorded, { state: join(dir, 'state') })

    assert.equal(shownBy(swaps, a), key(b), "the agent's a shows the template's a")
    assert.equal(shownBy(swaps, b), key(gone), "the agent's b shows the template's b")
    assert.equal(shownBy(swaps, gone), key(a), 'the chain closes: no identity is shown twice')
    assert.equal(shownBy(swaps, c), key(c))
    const from = swaps.map(([identity]) => key(identity))
    const to = swaps.map(([, identity]) => key(identity))
    assert.sameMembers(from, to)
    assert.lengthOf(new Set(from), from.length)
  })

  test('what a template saw is recorded without following links', async ({ assert }) => {
    const { symlink } = await import('node:fs/promises')
    await mkdir(join(dir, 'outside'))
    await writeFile(join(dir, 'outside', 'many'), 'x')
    await symlink(join(dir, 'outside'), join(dir, 'state', 'linked'))
    const recorded = await recordIdentities({ state: join(dir, 'state') })
    assert.sameMembers(
      recorded.map((entry) => `${entry.path}:${entry.kind}`),
      [':folder', 'a:file', 'b:file', 'c:file', 'linked:link']
    )
  })

  test("Node.js's stat calls show the swapped identities once the table is filled", async ({
    assert,
  }) => {
    const shim = fileIdentityShim(join(dir, 'lib'))
    if (!('path' in shim)) return assert.fail(shim.reason)
    const [a, b] = await Promise.all(['a', 'b'].map((n) => identityOf(join(dir, 'state', n))))
    const swaps: Array<[FileIdentity, FileIdentity]> = [
      [a, b],
      [b, a],
    ]
    const script = `
      const fs = require('node:fs')
      process.stdout.write('ready\\n')
      process.stdin.once('data', async () => {
        const id = (s) => s.dev + ':' + s.ino
        const path = process.argv[1]
        const fd = fs.openSync(path, 'r')
        const seen = [id(fs.statSync(path, { bigint: true })), id(await fs.promises.stat(path, { bigint: true })),
          id(fs.lstatSync(path, { bigint: true })), id(fs.fstatSync(fd, { bigint: true }))]
        process.stdout.write(JSON.stringify(seen) + '\\n')
        process.exit(0)
      })`
    const child = spawn(process.execPath, ['-e', script, join(dir, 'state', 'a')], {
      env: { LD_PRELOAD: shim.path, PATH: process.env.PATH },
      stdio: ['pipe', 'pipe', 'inherit'],
    })
    const lines = (async function* () {
      let buffered = ''
      for await (const chunk of child.stdout) {
        buffered += chunk
        let end
        while ((end = buffered.indexOf('\n')) !== -1) {
          yield buffered.slice(0, end)
          buffered = buffered.slice(end + 1)
        }
      }
    })()
    const ready = await lines.next()
    assert.equal(ready.value, 'ready')

    // Its table, found in its writable memory and filled as a template copy's images are.
    const mem = openSync(`/proc/${child.pid}/mem`, 'r+')
    let pages = 0
    try {
      const regions = readFileSync(`/proc/${child.pid}/maps`, 'utf8')
        .split('\n')
        .filter((line) => / rw.p /.test(line))
        .map((line) =>
          line
            .split(' ')[0]
            .split('-')
            .map((hex) => Number.parseInt(hex, 16))
        )
      for (const [start, end] of regions) {
        if (end - start > 64 * 1024 * 1024) continue
        const view = Buffer.alloc(end - start)
        try {
          readSync(mem, view, 0, view.length, start)
        } catch {
          continue
        }
        for (const { at, page } of swapTablesIn(view, view.length)) {
          const body = swapTablePage(swaps, page, 1)
          writeSync(mem, body, 0, body.length, start + at + SWAP_TABLE_BODY)
          pages++
        }
      }
    } finally {
      closeSync(mem)
    }
    assert.equal(pages, 16, 'every page of its table')
    child.stdin.write('go\n')
    const answer = await lines.next()
    const seen = JSON.parse(answer.value as string)
    assert.deepEqual(seen, [key(b), key(b), key(b), key(b)])
  })
    .skip(process.getuid?.() !== 0, "writes a child's memory (root)")
    .timeout(60_000)
})
