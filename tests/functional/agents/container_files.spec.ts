import { existsSync } from 'node:fs'
import { mkdir, readFile, rm, utimes, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { TRAVERSAL_PATHS, plantEscapeLinks } from '#tests/helpers/traversal'
import type User from '#identity/models/user'
import { jwtFor } from '#tests/helpers/identity'
import { FILE_LIST_MAX } from '#agents/controllers/container_files_controller'
import { baseUrl } from '#tests/helpers/http'
import {
  agentOwners,
  chatWithContainer,
  foldersOf,
  statusOf,
  waitUntilServing,
} from '#tests/helpers/agents_http'

const owners = agentOwners()

test.group('Agents: container files through HTTP', (group) => {
  let owner: User
  let jwt: string
  let agentId: string
  let files: string

  group.setup(async () => {
    owner = await owners.create({ tier: 'pro' })
    jwt = jwtFor(owner)
    const response = await fetch(`${baseUrl()}/agents`, {
      method: 'POST',
      headers: { 'authorization': `Bearer ${jwt}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        name: 'File Keeper',
        framework: 'fixture',
        config: { personality: 'Tidy' },
      }),
    })
    const body = (await response.json()) as { data: { id: string } }
    agentId = body.data.id
    files = `/agents/${agentId}/container-files`
    await waitUntilServing(agentId)
    await plantEscapeLinks(foldersOf(agentId), agentId)
    return () => owners.removeAgents()
  })

  test('write, read, list and delete with both path forms', async ({ client, assert }) => {
    const written = await client
      .put(files)
      .bearerToken(jwt)
      .json({ path: 'notes/todo.md', content: '- ship it' })
    written.assertStatus(200)
    assert.deepEqual(written.body().data, { path: '/notes/todo.md', size: 9 })

    const viaPost = await client
      .post(`${files}/write`)
      .bearerToken(jwt)
      .json({ path: '/notes/post.txt', content: 'héllo' })
    viaPost.assertStatus(200)
    assert.deepEqual(viaPost.body().data, { path: '/notes/post.txt', size: 6 })
    const viaPut = await client
      .put(`${files}/write`)
      .bearerToken(jwt)
      .json({ path: 'empty.txt', content: '' })
    viaPut.assertStatus(200)
    assert.deepEqual(viaPut.body().data, { path: '/empty.txt', size: 0 })

    const root = await client.get(files).bearerToken(jwt)
    root.assertStatus(200)
    assert.deepInclude(root.body().data.files, { name: 'SOUL.md', type: 'file', size: 4 })
    assert.deepInclude(root.body().data.files, { name: 'notes', type: 'directory', size: 0 })
    const notes = await client.get(files).qs({ path: '/notes' }).bearerToken(jwt)
    assert.sameDeepMembers(notes.body().data.files, [
      { name: 'todo.md', type: 'file', size: 9 },
      { name: 'post.txt', type: 'file', size: 6 },
    ])

    const read = await client.get(`${files}/read`).qs({ path: 'notes/todo.md' }).bearerToken(jwt)
    assert.deepEqual(read.body().data, { content: '- ship it', size: 9 })
    // The file is really in the agent's workspace.
    const onDisk = await readFile(join(foldersOf(agentId).workspace, 'notes/todo.md'), 'utf8')
    assert.equal(onDisk, '- ship it')

    const deleted = await client.delete(files).qs({ path: 'notes/todo.md' }).bearerToken(jwt)
    assert.deepEqual(deleted.body().data, { deleted: '/notes/todo.md' })
    const deletedToo = await client
      .delete(`${files}/delete`)
      .qs({ path: '/notes' })
      .bearerToken(jwt)
    assert.deepEqual(deletedToo.body().data, { deleted: '/notes' })
    assert.isFalse(existsSync(join(foldersOf(agentId).workspace, 'notes')))
  })

  test('a write stores exactly the bytes sent (whitespace, line endings) and reports their UTF-8 size', async ({
    client,
    assert,
  }) => {
    // 52 UTF-8 bytes (issue 26: was reported as 51, the final newline trimmed away).
    const content = '\n  leading spaces\r\nsnowman \u2603 inside\ttab and more \n'
    const bytes = Buffer.byteLength(content, 'utf8')
    assert.equal(bytes, 52)
    const written = await client.put(files).bearerToken(jwt).json({ path: 'exact.txt', content })
    written.assertStatus(200)
    assert.deepEqual(written.body().data, { path: '/exact.txt', size: bytes })
    const read = await client.get(`${files}/read`).qs({ path: 'exact.txt' }).bearerToken(jwt)
    assert.deepEqual(read.body().data, { content, size: bytes })
    const onDisk = await readFile(join(foldersOf(agentId).workspace, 'exact.txt'))
    assert.isTrue(onDisk.equals(Buffer.from(content, 'utf8')), 'the same bytes on disk')
  })

  test('files the agent writes are visible; missing paths 404; bad input 400', async ({
    client,
    assert,
  }) => {
    await chatWithContainer(agentId, '__write__ reports/today.txt written by the agent')
    const read = await client
      .get(`${files}/read`)
      .qs({ path: 'reports/today.txt' })
      .bearerToken(jwt)
    assert.equal(read.body().data.content, 'written by the agent')

    const missing = await client.get(`${files}/read`).qs({ path: 'nope.txt' }).bearerToken(jwt)
    assert.equal(missing.status(), 404)
    assert.equal(missing.body().code, 'NOT_FOUND')
    assert.equal(
      await statusOf(client.delete(files).qs({ path: 'nope.txt' }).bearerToken(jwt)),
      404
    )
    assert.equal(await statusOf(client.get(files).qs({ path: 'no-dir' }).bearerToken(jwt)), 404)

    assert.equal(await statusOf(client.get(`${files}/read`).bearerToken(jwt)), 400)
    assert.equal(await statusOf(client.put(files).bearerToken(jwt).json({ path: 'a.txt' })), 400)
    assert.equal(
      await statusOf(
        client
          .put(files)
          .bearerToken(jwt)
          .json({ path: 'big.txt', content: 'x'.repeat(1_000_001) })
      ),
      400
    )
    assert.equal(await statusOf(client.delete(files).qs({ path: '/' }).bearerToken(jwt)), 400)
  })

  test('a staging copy a cut write left is never listed, and removed once stale', async ({
    client,
    assert,
  }) => {
    const folder = join(foldersOf(agentId).workspace, 'cut')
    await mkdir(folder, { recursive: true })
    await writeFile(join(folder, 'kept.txt'), 'whole')
    // What a kill -9 during `write()` leaves: a fresh one (a write under way) and an old one.
    const fresh = join(folder, '.kept.txt.0123456789ab.partial')
    const stale = join(folder, '.kept.txt.ba9876543210.partial')
    await writeFile(fresh, 'wh')
    await writeFile(stale, 'who')
    const anHourAgo = new Date(Date.now() - 60 * 60_000)
    await utimes(stale, anHourAgo, anHourAgo)

    const listed = await client.get(files).qs({ path: '/cut' }).bearerToken(jwt)
    listed.assertStatus(200)
    assert.deepEqual(listed.body().data.files, [{ name: 'kept.txt', type: 'file', size: 5 }])
    assert.isTrue(existsSync(fresh), 'a write under way keeps its staging copy')
    assert.isFalse(existsSync(stale), 'a stale staging copy is removed')
  })

  test('a folder listing answers at most 1,000 entries, marked truncated', async ({
    client,
    assert,
  }) => {
    const folder = join(foldersOf(agentId).workspace, 'many')
    await mkdir(folder, { recursive: true })
    const total = FILE_LIST_MAX + 5
    for (let i = 0; i < total; i += 100) {
      await Promise.all(
        Array.from({ length: Math.min(100, total - i) }, (_, j) =>
          writeFile(join(folder, `f${String(i + j).padStart(5, '0')}.txt`), 'x')
        )
      )
    }
    const listed = await client.get(files).qs({ path: '/many' }).bearerToken(jwt)
    listed.assertStatus(200)
    assert.deepEqual(Object.keys(listed.body().data), ['files'])
    assert.lengthOf(listed.body().data.files, FILE_LIST_MAX)
    assert.equal(listed.header('x-truncated'), 'true')
    assert.equal(listed.header('x-total-count'), String(total))

    await rm(join(folder, 'f00000.txt'))
    await rm(join(folder, 'f00001.txt'))
    await rm(join(folder, 'f00002.txt'))
    await rm(join(folder, 'f00003.txt'))
    await rm(join(folder, 'f00004.txt'))
    const exact = await client.get(files).qs({ path: '/many' }).bearerToken(jwt)
    assert.lengthOf(exact.body().data.files, FILE_LIST_MAX)
    assert.isUndefined(exact.header('x-truncated'))
    await rm(folder, { recursive: true })
  }).timeout(60_000)

  test('another account gets 403 for every file route', async ({ client, assert }) => {
    const stranger = await owners.create()
    const other = jwtFor(stranger)
    for (const request of [
      client.get(files),
      client.get(`${files}/read`).qs({ path: 'SOUL.md' }),
      client.put(files).json({ path: 'x.txt', content: 'x' }),
      client.post(`${files}/write`).json({ path: 'x.txt', content: 'x' }),
      client.delete(files).qs({ path: 'SOUL.md' }),
      client.delete(`${files}/delete`).qs({ path: 'SOUL.md' }),
    ]) {
      const response = await request.bearerToken(other)
      assert.equal(response.status(), 403)
      assert.equal(response.body().code, 'FORBIDDEN')
    }
    assert.isTrue(existsSync(join(foldersOf(agentId).workspace, 'SOUL.md')))
  })

  for (const [index, path] of TRAVERSAL_PATHS.entries()) {
    // Control characters never reach the file manager: the input gate refuses them (400).
    // eslint-disable-next-line no-control-regex
    const [status, code] = /[\u0000-\u001f]/.test(path)
      ? [400, 'VALIDATION_ERROR']
      : [403, 'FORBIDDEN']
    test(`traversal ${index + 1}: ${JSON.stringify(path)} is ${status} on every route`, async ({
      client,
      assert,
    }) => {
      for (const request of [
        client.get(files).qs({ path }),
        client.get(`${files}/read`).qs({ path }),
        client.put(files).json({ path, content: 'pwned' }),
        client.post(`${files}/write`).json({ path, content: 'pwned' }),
        client.put(`${files}/write`).json({ path, content: 'pwned' }),
        client.delete(files).qs({ path }),
        client.delete(`${files}/delete`).qs({ path }),
      ]) {
        const response = await request.bearerToken(jwt)
        assert.equal(response.status(), status, `${JSON.stringify(path)}: ${response.text()}`)
        assert.equal(response.body().code, code)
      }
      const state = foldersOf(agentId).state
      assert.notEqual(await readFile(join(state, 'fixture.json'), 'utf8'), 'pwned')
      assert.isFalse(existsSync(`/tmp/agent-host-nowhere-${agentId}`))
    })
  }
})
