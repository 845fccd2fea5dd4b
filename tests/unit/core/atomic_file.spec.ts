import { execFile } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { test } from '@japa/runner'
import { writeFileAtomic, writeFileOnce } from '#core/files/atomic_file'

/**
 * Writers in other processes (as two service instances on one storage are):
 * each runs writeFileOnce / writeFileAtomic for the same path at once.
 */
async function racingProcesses(count: number, script: string, file: string): Promise<string[]> {
  const run = promisify(execFile)
  const results = await Promise.all(
    Array.from({ length: count }, (_, index) =>
      run(
        process.execPath,
        [
          '--import',
          '@poppinss/ts-exec',
          '--input-type=module',
          '-e',
          script,
          file,
          `writer-${index}`,
        ],
        { cwd: process.cwd() }
      )
    )
  )
  return results.map(({ stdout }) => stdout.trim())
}

test.group('Atomic files shared by instances', (group) => {
  let dir: string
  group.each.setup(() => {
    dir = mkdtempSync(join(tmpdir(), 'atomic-file-'))
    return () => rmSync(dir, { recursive: true, force: true })
  })

  test('writeFileOnce: of writers in several processes exactly one wins, and all answer it', async ({
    assert,
  }) => {
    const file = join(dir, 'credentials.json')
    const answers = await racingProcesses(
      4,
      `import { writeFileOnce } from '#core/files/atomic_file'
       const [file, me] = process.argv.slice(-2)
       process.stdout.write(await writeFileOnce(file, me))`,
      file
    )
    assert.lengthOf(new Set(answers), 1, 'every writer answers the same content')
    assert.equal(readFileSync(file, 'utf8'), answers[0])
    assert.match(answers[0], /^writer-\d$/)
    assert.deepEqual(readdirSync(dir), ['credentials.json'], 'no staged copy left')
    assert.equal(await writeFileOnce(file, 'later'), answers[0], 'a later writer gets the first')
  }).timeout(60_000)

  test('writeFileAtomic: concurrent writers never leave half a file or a staged copy', async ({
    assert,
  }) => {
    const file = join(dir, 'process.json')
    const big = (tag: string) => JSON.stringify({ tag, padding: 'x'.repeat(256 * 1024) })
    await Promise.all(
      Array.from({ length: 20 }, (_, index) => writeFileAtomic(file, big(`w${index}`)))
    )
    const stored = JSON.parse(readFileSync(file, 'utf8'))
    assert.match(stored.tag, /^w\d+$/)
    assert.deepEqual(readdirSync(dir), ['process.json'])
  })
})
