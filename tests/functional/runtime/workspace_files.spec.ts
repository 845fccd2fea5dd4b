import { randomUUID } from 'node:crypto'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync } from 'node:fs'
import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { TRAVERSAL_PATHS, plantEscapeLinks } from '#tests/helpers/traversal'
import {
  ForbiddenException,
  NotFoundException,
  ValidationException,
} from '#core/exceptions/api_exceptions'
import { agentPaths } from '#runtime/agent_paths'
import type { WorkspaceFiles } from '#runtime/types'
import { fixtureSpec, processHarness, type RuntimeHarness } from '#tests/helpers/runtime'

test.group('Runtime / workspace files through the process driver', (group) => {
  let harness: RuntimeHarness
  let agentId: string
  let files: WorkspaceFiles
  let workspace: string

  group.setup(async () => {
    harness = await processHarness()
    agentId = randomUUID()
    await harness.runtime.ensureStarted(fixtureSpec(agentId))
    await harness.runtime.waitUntilReady(agentId, { timeoutMs: 15_000 })
    files = await harness.runtime.files(agentId)
    const paths = agentPaths(harness.agentsDir, agentId)
    workspace = paths.workspace
    await plantEscapeLinks(paths, agentId)
    return () => harness.cleanup()
  })

  test('write, read, list and delete inside the workspace', async ({ assert }) => {
    const written = await files.write('/docs/notes.md', 'first line\nsecond line')
    assert.deepEqual(written, { path: '/docs/notes.md', size: 22 })
    assert.equal(
      await readFile(join(workspace, 'docs', 'notes.md'), 'utf8'),
      'first line\nsecond line'
    )

    assert.deepEqual(await files.read('docs/notes.md'), {
      content: 'first line\nsecond line',
      size: 22,
    })
    // The absolute host path of the workspace is accepted too.
    const viaHostPath = await files.read(join(workspace, 'docs', 'notes.md'))
    assert.equal(viaHostPath.size, 22)

    const root = await files.list('/')
    assert.deepInclude(root, { name: 'docs', type: 'directory', size: 0 })
    assert.deepInclude(root, { name: 'SOUL.md', type: 'file', size: 'A test agent'.length })
    assert.deepEqual(await files.list('docs'), [{ name: 'notes.md', type: 'file', size: 22 }])

    const unicode = await files.write('ü/ünïcode.txt', 'héllo')
    assert.equal(unicode.size, Buffer.byteLength('héllo'))

    assert.deepEqual(await files.delete('/docs/notes.md'), { deleted: '/docs/notes.md' })
    assert.isFalse(existsSync(join(workspace, 'docs', 'notes.md')))
    assert.deepEqual(await files.delete('docs'), { deleted: '/docs' })
    assert.isFalse(existsSync(join(workspace, 'docs')))
  })

  test('files the agent writes are visible to the file manager', async ({ assert }) => {
    await harness.runtime.chat(agentId, {
      conversationId: 'c',
      messages: [{ role: 'user', content: '__write__ reports/today.txt made by the agent' }],
    })
    assert.deepEqual(await files.read('/reports/today.txt'), {
      content: 'made by the agent',
      size: 17,
    })
  })

  test('missing paths are 404, directories and the root are refused as such', async ({
    assert,
  }) => {
    await assert.rejects(() => files.read('nope.txt'), NotFoundException)
    await assert.rejects(() => files.list('nope'), NotFoundException)
    await assert.rejects(() => files.delete('nope.txt'), NotFoundException)
    await files.write('dir/file.txt', 'x')
    await assert.rejects(() => files.read('dir'), ValidationException)
    await assert.rejects(() => files.list('dir/file.txt'), ValidationException)
    await assert.rejects(() => files.write('dir', 'x'), ValidationException)
    await assert.rejects(() => files.write('/', 'x'), ValidationException)
    await assert.rejects(() => files.delete('/'), ValidationException)
  })

  test('symlinks out of the workspace are listed but never followed', async ({ assert }) => {
    const root = await files.list('/')
    assert.deepInclude(root, { name: 'outside-dir', type: 'file', size: 0 })
    assert.deepInclude(root, { name: 'outside-file', type: 'file', size: 0 })
    // A link that stays inside the workspace works.
    await files.write('inside/target.txt', 'inside')
    await symlink(join(workspace, 'inside', 'target.txt'), join(workspace, 'inside-link'))
    const viaLink = await files.read('inside-link')
    assert.equal(viaLink.content, 'inside')
    // Deleting a link removes the link, not what it points to.
    await files.delete('inside-link')
    assert.isFalse(existsSync(join(workspace, 'inside-link')))
    assert.isTrue(existsSync(join(workspace, 'inside', 'target.txt')))
  })

  test('a parent folder swapped for a symlink mid-request never lets an operation out', async ({
    assert,
  }) => {
    // The attack: the agent swaps a folder of its workspace for a link to
    // the outside, again and again, while its owner's requests run.
    const outside = await mkdtemp(join(tmpdir(), 'confine-outside-'))
    await writeFile(join(outside, 'secret.txt'), 'outside secret')
    await writeFile(join(outside, 'victim.txt'), 'must stay')
    await files.write('race/secret.txt', 'inside')
    const racer = spawn(
      process.execPath,
      [
        '-e',
        `const fs = require('fs')
         const [dir, outside] = process.argv.slice(1)
         for (;;) {
           try { fs.renameSync(dir, dir + '.real'); fs.symlinkSync(outside, dir) } catch {}
           try { fs.unlinkSync(dir); fs.renameSync(dir + '.real', dir) } catch {}
         }`,
        join(workspace, 'race'),
        outside,
      ],
      { stdio: 'ignore' }
    )
    const seen = { reads: 0, writes: 0 }
    try {
      for (let round = 0; round < 400; round++) {
        await files.write('race/pwned.txt', 'pwned').then(
          () => seen.writes++,
          () => {}
        )
        const read = await files.read('race/secret.txt').catch(() => undefined)
        if (read) seen.reads++
        assert.notEqual(read?.content, 'outside secret', `round ${round}: read the outside`)
        const listed = await files.list('race').catch(() => [])
        assert.notInclude(
          listed.map((entry) => entry.name),
          'victim.txt',
          `round ${round}: listed the outside`
        )
        await files.delete('race/victim.txt').catch(() => {})
      }
    } finally {
      racer.kill('SIGKILL')
      await once(racer, 'exit')
    }
    assert.isFalse(existsSync(join(outside, 'pwned.txt')), 'nothing was written outside')
    assert.equal(await readFile(join(outside, 'victim.txt'), 'utf8'), 'must stay')
    assert.isAbove(seen.reads + seen.writes, 0, 'requests got through while the folder was real')
    await rm(outside, { recursive: true, force: true })
  })

  for (const path of TRAVERSAL_PATHS) {
    test(`refuses ${JSON.stringify(path)} for every operation`, async ({ assert }) => {
      for (const operation of [
        () => files.list(path),
        () => files.read(path),
        () => files.write(path, 'pwned'),
        () => files.delete(path),
      ]) {
        await assert.rejects(operation, ForbiddenException)
      }
      // Nothing was written or deleted outside the workspace.
      const state = agentPaths(harness.agentsDir, agentId).state
      assert.isTrue(existsSync(join(state, 'fixture.json')))
      assert.notEqual(await readFile(join(state, 'fixture.json'), 'utf8'), 'pwned')
      assert.isFalse(existsSync('/tmp/agent-host-does-not-exist-' + agentId))
    })
  }

  test('absolute paths of the agent folder outside the workspace are refused', async ({
    assert,
  }) => {
    const paths = agentPaths(harness.agentsDir, agentId)
    await writeFile(join(paths.state, 'secret.txt'), 'state secret')
    await assert.rejects(() => files.read(join(paths.state, 'secret.txt')), ForbiddenException)
    await assert.rejects(
      () => files.read(join(paths.root, 'runtime', 'credentials.json')),
      ForbiddenException
    )
    await assert.rejects(() => files.list(harness.agentsDir), ForbiddenException)
    // Any real host location, such as the service's own folder.
    await assert.rejects(() => files.read(join(process.cwd(), 'package.json')), ForbiddenException)
    await assert.rejects(
      () => files.write(join(process.cwd(), 'pwned.txt'), 'x'),
      ForbiddenException
    )
    assert.isFalse(existsSync(join(process.cwd(), 'pwned.txt')))
  })
})
