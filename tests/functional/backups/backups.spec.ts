import { randomBytes } from 'node:crypto'
import { readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { backupConfig } from '#config/backups'
import { backupsRoot } from '#backups/services/backup_store'
import { runDailyBackups } from '#backups/services/daily_backups'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import { jwtFor } from '#tests/helpers/identity'
import { baseUrl } from '#tests/helpers/http'
import { cgroupBases } from '#runtime/process/cgroups'
import { gatewayTokenFor } from '#runtime/credentials'
import {
  agentCountOf,
  agentOwners,
  chatWithContainer,
  createFixtureAgent,
  foldersOf,
  putToSleep,
  readWorkspaceFile,
  runtime,
  storedConfigOf,
  waitUntilServing,
  writeWorkspaceFile,
} from '#tests/helpers/agents_http'
import {
  alteredArchive,
  downloadArchive,
  packEntries,
  sha256,
  unpackEntries,
  uploadArchive,
  type RawEntry,
} from '#tests/helpers/agent_archives'

/** Nothing left of refused uploads in the service's work folder. */
function workLeftovers(): string[] {
  try {
    return readdirSync(join(backupsRoot(), '.work'))
  } catch {
    return []
  }
}

/** A running fixture agent with a file, memory, a schedule, knowledge and a secret; and its first backup. */
async function agentWithBackup(client: any, owner: { id: string }) {
  const jwt = jwtFor(owner)
  const agent = await createFixtureAgent(client, owner, {
    config: { personality: 'Calm', apiKey: 'sk-kept-secret' },
  })
  await waitUntilServing(agent.id)
  await writeWorkspaceFile(client, jwt, agent.id, 'notes.txt', 'before the backup')
  await chatWithContainer(agent.id, '__remember__ color=blue')
  await client
    .post(`/agents/${agent.id}/schedules`)
    .bearerToken(jwt)
    .json({ name: 'hourly', cron: '0 * * * *', message: 'status?' })
    .then((answer: any) => answer.assertStatus(201))
  await client
    .post(`/agents/${agent.id}/knowledge`)
    .bearerToken(jwt)
    .json({ filename: 'faq.txt', content: 'The shop opens at nine.' })
    .then((answer: any) => answer.assertStatus(201))
  const service = await runtime()
  const before = await service.status(agent.id)
  const made = await client.post(`/agents/${agent.id}/backups`).bearerToken(jwt).json({})
  made.assertStatus(201)
  const after = await service.status(agent.id)
  return { agent, jwt, backup: made.body().data, runs: { before, after } }
}

test.group('Agent backups', (group) => {
  const owners = agentOwners({ tier: 'pro', credits: 10_000 })
  group.teardown(() => owners.removeAgents())

  test('a running agent is backed up, listed, downloaded and restored: a file changed after the backup comes back', async ({
    client,
    assert,
  }) => {
    const owner = await owners.create()
    const { agent, jwt, backup, runs } = await agentWithBackup(client, owner)
    assert.equal(backup.kind, 'manual')
    assert.isAbove(backup.size, 0)
    assert.match(backup.sha256, /^[0-9a-f]{64}$/)
    assert.isFalse(backup.includeSecrets)
    if (cgroupBases()?.freezer) {
      // Frozen for the copy, never put to sleep: the same run goes on.
      assert.equal(runs.after.state, 'running')
      assert.equal(runs.after.containerId, runs.before.containerId)
    }
    await waitUntilServing(agent.id)

    const list = await client.get(`/agents/${agent.id}/backups`).bearerToken(jwt)
    list.assertStatus(200)
    assert.deepEqual(
      list.body().data.backups.map((entry: any) => entry.id),
      [backup.id]
    )

    const download = await downloadArchive(
      baseUrl(),
      jwt,
      `/agents/${agent.id}/backups/${backup.id}/download`
    )
    assert.equal(download.status, 200)
    assert.equal(download.headers.get('content-type'), 'application/gzip')
    assert.match(download.headers.get('content-disposition') ?? '', /attachment/)
    assert.equal(sha256(download.bytes), backup.sha256)
    const entries = await unpackEntries(download.bytes)
    const byName = new Map(entries.map((entry) => [entry.name, entry]))
    assert.equal(entries.at(-1)?.name, 'manifest.json')
    const manifest = JSON.parse(byName.get('manifest.json')!.content!.toString())
    assert.include(manifest, { format: 'agent-host-backup', formatVersion: 1, secrets: 'omitted' })
    assert.deepEqual(manifest.framework, { name: 'fixture', version: '1.0.0' })
    assert.equal(byName.get('files/workspace/notes.txt')?.content?.toString(), 'before the backup')
    assert.include(byName.get('files/state/memory.json')?.content?.toString(), 'blue')
    for (const [name, file] of Object.entries<any>(manifest.files)) {
      assert.equal(sha256(byName.get(name)!.content!), file.sha256, name)
    }
    const document = JSON.parse(byName.get('agent.json')!.content!.toString())
    assert.equal(document.config.personality, 'Calm')
    assert.notProperty(document.config, 'apiKey', 'secrets are left out by default')
    // The framework's rendered file holding secrets (0600) is never archived: rendered at start.
    const gatewayToken = await gatewayTokenFor(foldersOf(agent.id).credentialsFile)
    assert.notInclude([...byName.keys()], 'files/state/fixture.json')
    assert.include(manifest.skipped, 'files/state/fixture.json')
    for (const entry of entries) {
      assert.notInclude(entry.content?.toString() ?? '', gatewayToken, entry.name)
    }
    const knowledge = JSON.parse(byName.get('data/knowledge.json')!.content!.toString())
    assert.deepEqual(knowledge, [{ filename: 'faq.txt', content: 'The shop opens at nine.' }])

    // Changes after the backup...
    await writeWorkspaceFile(client, jwt, agent.id, 'notes.txt', 'changed after the backup')
    await writeWorkspaceFile(client, jwt, agent.id, 'later.txt', 'made after the backup')
    await client
      .delete(`/agents/${agent.id}/knowledge/faq.txt`)
      .bearerToken(jwt)
      .then((answer: any) => answer.assertStatus(200))

    // ...are undone by the restore, which saves them first.
    const restored = await client
      .post(`/agents/${agent.id}/backups/${backup.id}/restore`)
      .bearerToken(jwt)
    restored.assertStatus(200)
    assert.equal(restored.body().data.restoredFrom, backup.id)
    assert.equal(restored.body().data.preRestoreBackup.kind, 'pre-restore')
    await waitUntilServing(agent.id)
    assert.equal(await readWorkspaceFile(client, jwt, agent.id, 'notes.txt'), 'before the backup')
    assert.isUndefined(await readWorkspaceFile(client, jwt, agent.id, 'later.txt'))
    const memory = await client.get(`/agents/${agent.id}/memory`).bearerToken(jwt)
    assert.equal(memory.body().data.memory.color, 'blue')
    const files = await client.get(`/agents/${agent.id}/knowledge`).bearerToken(jwt)
    assert.deepEqual(
      files.body().data.map((file: any) => file.filename),
      ['faq.txt']
    )
    const config = await storedConfigOf(agent.id)
    assert.equal(config.apiKey, 'sk-kept-secret', 'the secret was kept')

    // The pre-restore backup holds the state before the restore.
    const saved = await downloadArchive(
      baseUrl(),
      jwt,
      `/agents/${agent.id}/backups/${restored.body().data.preRestoreBackup.id}/download`
    )
    const savedEntries = await unpackEntries(saved.bytes)
    assert.equal(
      savedEntries.find((entry) => entry.name === 'files/workspace/notes.txt')?.content?.toString(),
      'changed after the backup'
    )

    const deleted = await client.delete(`/agents/${agent.id}/backups/${backup.id}`).bearerToken(jwt)
    deleted.assertStatus(200)
    const after = await client.get(`/agents/${agent.id}/backups`).bearerToken(jwt)
    assert.deepEqual(
      after.body().data.backups.map((entry: any) => entry.kind),
      ['pre-restore']
    )
  }).timeout(120_000)

  test("another account's agent is 403 on every backup route; an unknown backup is 404", async ({
    client,
    assert,
  }) => {
    const owner = await owners.create()
    const stranger = await owners.create()
    const { agent, backup } = await agentWithBackup(client, owner)
    const jwt = jwtFor(stranger)
    const base = `/agents/${agent.id}`
    const answers = await Promise.all([
      client.post(`${base}/backups`).bearerToken(jwt).json({}),
      client.get(`${base}/backups`).bearerToken(jwt),
      client.get(`${base}/backups/${backup.id}/download`).bearerToken(jwt),
      client.post(`${base}/backups/${backup.id}/restore`).bearerToken(jwt),
      client.delete(`${base}/backups/${backup.id}`).bearerToken(jwt),
      client.post(`${base}/clone`).bearerToken(jwt),
    ])
    for (const answer of answers) {
      assert.equal(answer.status(), 403)
      assert.equal(answer.body().code, 'FORBIDDEN')
    }
    const unknown = await client
      .get(`${base}/backups/00000000-0000-4000-8000-000000000000/download`)
      .bearerToken(jwtFor(owner))
    unknown.assertStatus(404)
    const anonymous = await client.get(`${base}/backups`)
    anonymous.assertStatus(401)
  }).timeout(120_000)

  test('an agent asleep is backed up where it lies and stays asleep', async ({
    client,
    assert,
  }) => {
    const owner = await owners.create()
    const jwt = jwtFor(owner)
    const agent = await createFixtureAgent(client, owner)
    await waitUntilServing(agent.id)
    await writeWorkspaceFile(client, jwt, agent.id, 'dream.txt', 'written before the sleep')
    const service = await putToSleep(agent.id)
    const made = await client.post(`/agents/${agent.id}/backups`).bearerToken(jwt).json({})
    made.assertStatus(201)
    await agentLifecycle.settled()
    assert.equal(await service.containerView(agent.id), 'stopped')
    const download = await downloadArchive(
      baseUrl(),
      jwt,
      `/agents/${agent.id}/backups/${made.body().data.id}/download`
    )
    const entries = await unpackEntries(download.bytes)
    assert.equal(
      entries.find((entry) => entry.name === 'files/workspace/dream.txt')?.content?.toString(),
      'written before the sleep'
    )
  }).timeout(120_000)

  test('files that do not compress are stored, those that do are packed: the archive reads back whole', async ({
    client,
    assert,
  }) => {
    const owner = await owners.create()
    const jwt = jwtFor(owner)
    const agent = await createFixtureAgent(client, owner)
    await waitUntilServing(agent.id)
    const noise = randomBytes(600 * 1024)
    const text = Buffer.from('a line of the agent notes that repeats\n'.repeat(60_000))
    const workspace = foldersOf(agent.id).workspace
    writeFileSync(join(workspace, 'noise.bin'), noise)
    writeFileSync(join(workspace, 'notes.log'), text)
    const made = await client.post(`/agents/${agent.id}/backups`).bearerToken(jwt).json({})
    made.assertStatus(201)
    // The text shrank; the noise is there whole (stored, not deflated for nothing).
    assert.isBelow(made.body().data.size, noise.length + text.length / 4)
    assert.isAbove(made.body().data.size, noise.length)
    const download = await downloadArchive(
      baseUrl(),
      jwt,
      `/agents/${agent.id}/backups/${made.body().data.id}/download`
    )
    const entries = await unpackEntries(download.bytes)
    const byName = new Map(entries.map((entry) => [entry.name, entry.content]))
    assert.equal(sha256(byName.get('files/workspace/noise.bin')!), sha256(noise))
    assert.equal(sha256(byName.get('files/workspace/notes.log')!), sha256(text))
    // The service's own reader takes it too: an import carries both files.
    const imported = await uploadArchive(baseUrl(), jwt, download.bytes)
    assert.equal(imported.status, 201, JSON.stringify(imported.body))
    const copy = foldersOf(imported.body.data.id).workspace
    assert.equal(sha256(readFileSync(join(copy, 'noise.bin'))), sha256(noise))
    assert.equal(sha256(readFileSync(join(copy, 'notes.log'))), sha256(text))
  }).timeout(120_000)

  test('a link the agent planted in its folders is left out of the archive, never followed', async ({
    client,
    assert,
  }) => {
    const owner = await owners.create()
    const jwt = jwtFor(owner)
    const agent = await createFixtureAgent(client, owner)
    await waitUntilServing(agent.id)
    symlinkSync('/etc/passwd', join(foldersOf(agent.id).workspace, 'leak.txt'))
    const made = await client.post(`/agents/${agent.id}/backups`).bearerToken(jwt).json({})
    made.assertStatus(201)
    const download = await downloadArchive(
      baseUrl(),
      jwt,
      `/agents/${agent.id}/backups/${made.body().data.id}/download`
    )
    const entries = await unpackEntries(download.bytes)
    assert.notInclude(
      entries.map((entry) => entry.name),
      'files/workspace/leak.txt'
    )
    assert.isFalse(entries.some((entry) => entry.content?.toString().includes('root:x:0:0')))
    const manifest = JSON.parse(entries.at(-1)!.content!.toString())
    assert.include(manifest.skipped, 'files/workspace/leak.txt')
  }).timeout(120_000)

  test('an archive imports as a new agent of the caller; a clone is a new agent with the same state', async ({
    client,
    assert,
  }) => {
    const owner = await owners.create()
    const { agent, jwt, backup } = await agentWithBackup(client, owner)
    const download = await downloadArchive(
      baseUrl(),
      jwt,
      `/agents/${agent.id}/backups/${backup.id}/download`
    )

    const importer = await owners.create()
    const importerJwt = jwtFor(importer)
    const imported = await uploadArchive(baseUrl(), importerJwt, download.bytes)
    assert.equal(imported.status, 201, JSON.stringify(imported.body))
    const copy = imported.body.data
    assert.notEqual(copy.id, agent.id)
    assert.notEqual(copy.slug, agent.slug)
    assert.equal(copy.name, agent.name)
    assert.notProperty(copy.config, 'apiKey')
    await waitUntilServing(copy.id)
    assert.equal(
      await readWorkspaceFile(client, importerJwt, copy.id, 'notes.txt'),
      'before the backup'
    )
    const schedules = await client.get(`/agents/${copy.id}/schedules`).bearerToken(importerJwt)
    assert.deepEqual(
      schedules.body().data.map((schedule: any) => schedule.name),
      ['hourly']
    )
    const proxyTokens = await db
      .from('agents')
      .whereIn('id', [agent.id, copy.id])
      .select('proxy_token_hash')
    assert.notEqual(proxyTokens[0].proxy_token_hash, proxyTokens[1].proxy_token_hash)

    const cloned = await client.post(`/agents/${agent.id}/clone`).bearerToken(jwt)
    cloned.assertStatus(201)
    const clone = cloned.body().data
    assert.equal(clone.name, `${agent.name} (copy)`)
    assert.notEqual(clone.id, agent.id)
    await waitUntilServing(clone.id)
    assert.equal(await readWorkspaceFile(client, jwt, clone.id, 'notes.txt'), 'before the backup')
    const config = await storedConfigOf(clone.id)
    assert.equal(config.apiKey, 'sk-kept-secret', 'a clone keeps secrets')
    const memory = await client.get(`/agents/${clone.id}/memory`).bearerToken(jwt)
    assert.equal(memory.body().data.memory.color, 'blue')
  }).timeout(180_000)

  test('hostile and corrupted archives are refused with 400 and create nothing', async ({
    client,
    assert,
  }) => {
    const owner = await owners.create()
    const { agent, jwt, backup } = await agentWithBackup(client, owner)
    const download = await downloadArchive(
      baseUrl(),
      jwt,
      `/agents/${agent.id}/backups/${backup.id}/download`
    )
    const valid = download.bytes
    const importer = await owners.create()
    const importerJwt = jwtFor(importer)
    const file = (name: string, content = 'x'): RawEntry => ({
      name,
      content: Buffer.from(content),
    })
    const cases: Array<[string, Buffer, RegExp]> = [
      [
        'a symbolic link',
        await alteredArchive(valid, (entries) => [
          { name: 'files/workspace/link', type: 'symlink', linkname: '/etc/passwd' },
          ...entries,
        ]),
        /symbolic link/,
      ],
      [
        'a hard link',
        await alteredArchive(valid, (entries) => [
          { name: 'files/workspace/hard', type: 'link', linkname: 'agent.json' },
          ...entries,
        ]),
        /hard link/,
      ],
      [
        '..',
        await alteredArchive(valid, (entries) => [
          file('files/workspace/../../escape.txt'),
          ...entries,
        ]),
        /"\.\."/,
      ],
      [
        'an absolute path',
        await alteredArchive(valid, (entries) => [file('/tmp/absolute.txt'), ...entries]),
        /absolute path/,
      ],
      [
        'a name outside the format',
        await alteredArchive(valid, (entries) => [file('files/tmp/x.txt'), ...entries]),
        /not part of the format/,
      ],
      [
        'a wrong hash',
        await alteredArchive(
          valid,
          (entries) =>
            entries.map((entry) =>
              entry.name === 'files/workspace/notes.txt'
                ? { ...entry, content: Buffer.from('tampered') }
                : entry
            ),
          { keepManifest: true }
        ),
        /does not match its SHA-256/,
      ],
      [
        'a missing manifest',
        await alteredArchive(valid, (entries) =>
          entries.filter((entry) => entry.name !== 'manifest.json')
        ),
        /no manifest\.json/,
      ],
      [
        'an unknown format version',
        await alteredArchive(valid, (entries) =>
          entries.map((entry) => {
            if (entry.name !== 'manifest.json') return entry
            const manifest = JSON.parse(entry.content!.toString())
            return {
              ...entry,
              content: Buffer.from(JSON.stringify({ ...manifest, formatVersion: 99 })),
            }
          })
        ),
        /format version 99/,
      ],
      [
        'a file the manifest does not list',
        await alteredArchive(valid, (entries) => [...entries, file('files/workspace/extra.txt')], {
          keepManifest: true,
        }),
        /not listed in the manifest/,
      ],
      ['not an archive', Buffer.from('just some text'), /gzip-compressed tar/],
      ['an empty archive', await packEntries([]), /empty/],
    ]
    const before = await agentCountOf(importer)
    const leftoversBefore = workLeftovers()
    for (const [what, archive, reason] of cases) {
      const answer = await uploadArchive(baseUrl(), importerJwt, archive)
      assert.equal(answer.status, 400, `${what}: ${JSON.stringify(answer.body)}`)
      assert.equal(answer.body.code, 'VALIDATION_ERROR', what)
      assert.match(answer.body.error, reason, what)
    }

    // Oversize, as sent and as unpacked.
    const limits = { ...backupConfig }
    try {
      backupConfig.maxArchiveBytes = 1024
      const tooLarge = await uploadArchive(baseUrl(), importerJwt, valid)
      assert.equal(tooLarge.status, 400)
      assert.match(tooLarge.body.error, /larger than 1024 bytes/)
      backupConfig.maxArchiveBytes = limits.maxArchiveBytes
      backupConfig.maxUnpackedBytes = 64
      const bomb = await uploadArchive(baseUrl(), importerJwt, valid)
      assert.equal(bomb.status, 400)
      assert.match(bomb.body.error, /unpacks to more than 64 bytes/)
    } finally {
      Object.assign(backupConfig, limits)
    }

    const notMultipart = await client.post('/agents/import').bearerToken(importerJwt).json({})
    notMultipart.assertStatus(400)

    assert.equal(await agentCountOf(importer), before, 'no agent was created')
    assert.deepEqual(workLeftovers(), leftoversBefore, 'nothing of the uploads is left')
    // The archive itself still imports.
    const good = await uploadArchive(baseUrl(), importerJwt, valid)
    assert.equal(good.status, 201, JSON.stringify(good.body))
  }).timeout(180_000)

  test('the plan limit applies to imports and clones', async ({ client, assert }) => {
    const owner = await owners.create({ tier: 'free' })
    const { agent, jwt } = await agentWithBackup(client, owner)
    const cloned = await client.post(`/agents/${agent.id}/clone`).bearerToken(jwt)
    cloned.assertStatus(400)
    assert.equal(await agentCountOf(owner), 1)
  }).timeout(120_000)

  test('daily backups: one per agent and day, kept by plan', async ({ client, assert }) => {
    const owner = await owners.create({ tier: 'free' })
    const jwt = jwtFor(owner)
    const agent = await createFixtureAgent(client, owner)
    await waitUntilServing(agent.id)
    await runDailyBackups(new Date(), { agentIds: [agent.id] })
    await runDailyBackups(new Date(), { agentIds: [agent.id] })
    const rows = () =>
      db.from('agent_backups').where('agent_id', agent.id).where('kind', 'daily').select('id')
    assert.lengthOf(await rows(), 1, 'one a day')
    // Older daily backups beyond the free plan's 3 go.
    for (let day = 1; day <= 4; day++) {
      await db
        .from('agent_backups')
        .where('agent_id', agent.id)
        .update({ created_at: new Date(Date.now() - day * 25 * 60 * 60 * 1000) })
      await runDailyBackups(new Date(), { agentIds: [agent.id] })
    }
    assert.lengthOf(await rows(), backupConfig.dailyKept.free)
    const list = await client.get(`/agents/${agent.id}/backups`).bearerToken(jwt)
    assert.lengthOf(list.body().data.backups, backupConfig.dailyKept.free)
    // Each daily backup paused the agent; it runs again.
    await agentLifecycle.settled()
    await waitUntilServing(agent.id)
  }).timeout(180_000)
})
