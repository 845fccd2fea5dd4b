import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { rewriteIdentity } from '#runtime/process/criu_images'

/**
 * A template copy's credentials (app/runtime/process/criu_images.ts): CRIU
 * core images built here by hand (CoreEntry.thread_core.creds, field
 * numbers of CRIU's images/core.proto and creds.proto) with a field no
 * version of this code knows, so the test shows what changes and what
 * stays byte for byte.
 */
function varint(value: number): Buffer {
  const bytes: number[] = []
  let rest = value
  do {
    let byte = rest % 128
    rest = Math.floor(rest / 128)
    if (rest > 0) byte |= 0x80
    bytes.push(byte)
  } while (rest > 0)
  return Buffer.from(bytes)
}
const number = (field: number, value: number) => Buffer.concat([varint(field * 8), varint(value)])
const message = (field: number, ...parts: Buffer[]) => {
  const body = Buffer.concat(parts)
  return Buffer.concat([varint(field * 8 + 2), varint(body.length), body])
}

/** A core image of one thread running as `uid` (gids: `uid`, its fs uid `fsuid`). */
function coreImage(uid: number, fsuid = uid): Buffer {
  const creds = message(
    10,
    ...[1, 3, 5].map((field) => number(field, uid)),
    number(7, fsuid),
    ...[2, 4, 6, 8].map((field) => number(field, uid)),
    number(9, 0),
    number(13, 0)
  )
  const threadCore = message(
    5,
    number(1, 12345),
    number(2, 24),
    creds,
    message(13, Buffer.from('node'))
  )
  const entry = Buffer.concat([
    number(1, 1),
    message(3, number(1, 1), message(99, Buffer.from('unknown to this code'))),
    threadCore,
  ])
  const header = Buffer.alloc(8)
  header.writeUInt32LE(0x54564319, 0)
  header.writeUInt32LE(0x55053847, 4)
  const size = Buffer.alloc(4)
  size.writeUInt32LE(entry.length)
  return Buffer.concat([header, size, entry])
}

test.group('Runtime / CRIU image credentials', (group) => {
  let dir: string
  group.each.setup(async () => {
    dir = await mkdtemp(join(tmpdir(), 'criu-images-'))
    return () => rm(dir, { recursive: true, force: true })
  })

  test("every thread's ids become the agent's; every other byte stays", async ({ assert }) => {
    // A longer varint (3 bytes -> 4 bytes) makes every enclosing length change.
    await writeFile(join(dir, 'core-1.img'), coreImage(1_900_001))
    await writeFile(join(dir, 'core-7.img'), coreImage(1_900_001))
    await writeFile(join(dir, 'pages-1.img'), 'not a core image')
    const threads = await rewriteIdentity(dir, {
      from: { uid: 1_900_001, gid: 1_900_001 },
      to: { uid: 268_435_999, gid: 268_435_999 },
    })
    assert.equal(threads, 2)
    for (const name of ['core-1.img', 'core-7.img']) {
      assert.deepEqual(await readFile(join(dir, name)), coreImage(268_435_999))
    }
    assert.equal(await readFile(join(dir, 'pages-1.img'), 'utf8'), 'not a core image')
  })

  test('a thread under another id than the template is refused', async ({ assert }) => {
    await writeFile(join(dir, 'core-1.img'), coreImage(1_900_001, 0))
    await assert.rejects(
      () =>
        rewriteIdentity(dir, {
          from: { uid: 1_900_001, gid: 1_900_001 },
          to: { uid: 1_900_002, gid: 1_900_002 },
        }),
      /runs as id 0/
    )
  })

  test('a folder without core images is refused', async ({ assert }) => {
    await assert.rejects(
      () =>
        rewriteIdentity(dir, {
          from: { uid: 1, gid: 1 },
          to: { uid: 2, gid: 2 },
        }),
      /no core images/
    )
  })
})
