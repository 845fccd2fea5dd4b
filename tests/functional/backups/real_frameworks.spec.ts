import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import app from '@adonisjs/core/services/app'
import { storageDir } from '#core/bootstrap/paths'
import { frameworkPlugin } from '#agents/services/agent_config'
import { cgroupBases } from '#runtime/process/cgroups'
import { gatewayTokenFor } from '#runtime/credentials'
import { apiKeyFor, jwtFor } from '#tests/helpers/identity'
import { baseUrl } from '#tests/helpers/http'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import { agentOwners, foldersOf, runtime, waitUntilServing } from '#tests/helpers/agents_http'
import {
  downloadArchive,
  sha256,
  unpackEntries,
  uploadArchive,
} from '#tests/helpers/agent_archives'
import { startModelUpstream, useUpstream, type ModelUpstream } from '#tests/helpers/model_upstream'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'

/**
 * Backups of running real agents (issue 29): a Hermes agent and an
 * OpenClaw agent, each booted through the API (their frameworks installed
 * into the runtime cache on first use), are backed up while they run
 * (frozen for the copy, not put to sleep), downloaded (the manifest names
 * the framework and its version and hashes every file, its state included),
 * restored (a file changed after the backup comes back and the agent
 * answers through its own gateway again), imported on a second service
 * with its own database, agents folder and APP_KEY (sharing this run's
 * storage, so nothing is installed twice) and cloned.
 *
 * Heavy: an OpenClaw gateway boot takes ~20 s of CPU and ~1 GB. Each
 * framework boots for the agent, its restore, its import and (Hermes) its
 * clone; the OpenClaw clone's folders are checked and it is deleted before
 * its boot gets far. Each test deletes its agents at its end.
 */
/** Framework state an archive holds, and rendered files holding secrets it leaves out (0600). */
const FRAMEWORK_STATE: Record<string, { held: string[]; skipped: string[] }> = {
  hermes: {
    held: ['files/state/config.yaml', 'files/state/state.db', 'files/state/memories/MEMORY.md'],
    skipped: ['files/state/.env'],
  },
  openclaw: { held: ['files/workspace/SOUL.md'], skipped: ['files/state/openclaw.json'] },
}

test.group('Backups of running real OpenClaw and Hermes agents', (group) => {
  const owners = agentOwners({ tier: 'pro', credits: 10_000_000 })
  let upstream: ModelUpstream
  let restoreUpstream: () => void
  let other: ServiceUnderFault | undefined
  let otherAgents: string | undefined
  group.setup(async () => {
    upstream = await startModelUpstream({ reply: 'Safely archived.' })
    restoreUpstream = useUpstream(upstream, {
      defaultModel: 'backup-test-model',
      rates: { 'backup-test-model': { input: 1, output: 1 } },
    })
    return async () => {
      await owners.removeAgents()
      await other?.destroy()
      if (otherAgents) rmSync(otherAgents, { recursive: true, force: true })
      restoreUpstream()
      await upstream.close()
    }
  })

  /**
   * The second installation, started once: its own database, agents folder
   * and APP_KEY; the same storage as this run, so it finds the frameworks
   * this run installed where their launches name them (no second install).
   */
  async function secondService(): Promise<ServiceUnderFault> {
    if (other) return other
    otherAgents = mkdtempSync(join(tmpdir(), 'backup-second-agents-'))
    other = await startServiceUnderFault({
      STORAGE_DIR: storageDir(app.appRoot),
      AGENTS_DIR: otherAgents,
      APP_KEY: randomBytes(32).toString('base64url'),
      LOG_LEVEL: 'warn',
    })
    return other
  }

  /** True when the turn since `seen` reached the model from the agent's own gateway (its calls carry its tools). */
  function answeredByGateway(seen: number): boolean {
    return upstream.requests
      .slice(seen)
      .some(
        (request) => request.path === '/v1/chat/completions' && Array.isArray(request.body?.tools)
      )
  }

  for (const framework of ['hermes', 'openclaw']) {
    test(`a running ${framework} agent: backed up while it runs; downloaded; restored; imported elsewhere; cloned`, async ({
      client,
      assert,
    }) => {
      const owner = await owners.create()
      const jwt = jwtFor(owner)
      const key = await apiKeyFor(owner)
      const created = await client
        .post('/agents')
        .bearerToken(jwt)
        .json({
          name: `Keeper ${framework}`,
          framework,
          config: { personality: 'You keep records.' },
        })
      created.assertStatus(201)
      const agentId: string = created.body().data.id
      await waitUntilServing(agentId, 420_000)
      const chat = async (message: string) => {
        const seen = upstream.requests.length
        const answer = await client
          .post(`/api/v1/agents/${agentId}/chat`)
          .bearerToken(key)
          .json({ message, history: [] })
        answer.assertStatus(200)
        return { content: answer.body().data.content as string, byGateway: answeredByGateway(seen) }
      }
      const first = await chat('Note that the archive opens at nine.')
      assert.equal(first.content, 'Safely archived.')
      assert.isTrue(first.byGateway, 'answered by its own gateway')

      const writeFile = (path: string, content: string) =>
        client
          .put(`/agents/${agentId}/container-files`)
          .bearerToken(jwt)
          .json({ path, content })
          .then((answer) => answer.assertStatus(200))
      const readFile = async (path: string, id = agentId, token = jwt) => {
        const answer = await client
          .get(`/agents/${id}/container-files/read`)
          .qs({ path })
          .bearerToken(token)
        return answer.status() === 200 ? (answer.body().data.content as string) : undefined
      }
      await writeFile('records/ledger.md', 'before the backup')

      const service = await runtime()
      const before = await service.status(agentId)
      const made = await client.post(`/agents/${agentId}/backups`).bearerToken(jwt).json({})
      made.assertStatus(201)
      const backup = made.body().data
      if (cgroupBases()?.freezer) {
        const after = await service.status(agentId)
        assert.equal(after.state, 'running', 'frozen for the copy, never put to sleep')
        assert.equal(after.containerId, before.containerId, 'the same run goes on')
      }

      // The download: the manifest names the framework and hashes every file it holds.
      const download = await downloadArchive(
        baseUrl(),
        jwt,
        `/agents/${agentId}/backups/${backup.id}/download`
      )
      assert.equal(download.status, 200)
      assert.equal(sha256(download.bytes), backup.sha256)
      const entries = await unpackEntries(download.bytes)
      const byName = new Map(entries.map((entry) => [entry.name, entry]))
      const manifest = JSON.parse(byName.get('manifest.json')!.content!.toString())
      const plugin = await frameworkPlugin(framework)
      assert.include(manifest, {
        format: 'agent-host-backup',
        formatVersion: 1,
        secrets: 'omitted',
      })
      assert.deepEqual(manifest.framework, { name: framework, version: plugin.version })
      assert.equal(
        byName.get('files/workspace/records/ledger.md')?.content?.toString(),
        'before the backup'
      )
      const held = Object.keys(manifest.files)
      assert.isTrue(
        held.some((name) => name.startsWith('files/state/')),
        `its framework state is held: ${held.join(', ')}`
      )
      for (const name of FRAMEWORK_STATE[framework].held) assert.include(held, name)
      for (const name of FRAMEWORK_STATE[framework].skipped) assert.include(manifest.skipped, name)
      assert.isAbove(Object.keys(manifest.files).length, 5)
      for (const [name, file] of Object.entries<any>(manifest.files)) {
        const entry = byName.get(name)
        assert.exists(entry, name)
        assert.equal(entry!.content!.length, file.size, name)
        assert.equal(sha256(entry!.content!), file.sha256, name)
      }
      // Rendered secrets (Hermes' .env: gateway token, model key) are never archived.
      const gatewayToken = await gatewayTokenFor(foldersOf(agentId).credentialsFile)
      for (const entry of entries) {
        assert.notInclude(entry.content?.toString() ?? '', gatewayToken, entry.name)
      }

      // Changed after the backup, then restored: the file comes back, the agent answers again.
      await writeFile('records/ledger.md', 'changed after the backup')
      await writeFile('records/later.md', 'made after the backup')
      const restored = await client
        .post(`/agents/${agentId}/backups/${backup.id}/restore`)
        .bearerToken(jwt)
      restored.assertStatus(200)
      await waitUntilServing(agentId, 420_000)
      assert.equal(await readFile('records/ledger.md'), 'before the backup')
      assert.isUndefined(await readFile('records/later.md'))
      const again = await chat('Are the records back?')
      assert.equal(again.content, 'Safely archived.')
      assert.isTrue(again.byGateway, 'the restored agent answers through its own gateway')

      // Another installation imports the download and runs the agent from it.
      const second = await secondService()
      const token = await second.signUp()
      const imported = await uploadArchive(second.server.url, token, download.bytes)
      assert.equal(imported.status, 201, JSON.stringify(imported.body))
      const moved = imported.body.data
      assert.equal(moved.framework, framework)
      await second.waitUntilRunning(token, moved.id, 420_000)
      const movedFile = await second.call(
        `/agents/${moved.id}/container-files/read?path=${encodeURIComponent('records/ledger.md')}`,
        { token }
      )
      assert.equal(
        movedFile.body.data?.content,
        'before the backup',
        JSON.stringify(movedFile.body)
      )
      // One real gateway at a time on this host: the imported one goes once it has run.
      await second.call(`/agents/${moved.id}`, { method: 'DELETE', token })

      // A clone: a new agent of the same owner from the state now.
      const cloned = await client.post(`/agents/${agentId}/clone`).bearerToken(jwt)
      cloned.assertStatus(201)
      const clone = cloned.body().data
      assert.notEqual(clone.id, agentId)
      assert.equal(clone.framework, framework)
      if (framework === 'hermes') {
        await waitUntilServing(clone.id, 420_000)
        assert.equal(await readFile('records/ledger.md', clone.id), 'before the backup')
      } else {
        // Its folders are written before it starts (its boot would be a fourth OpenClaw gateway).
        const ledger = join(foldersOf(clone.id).workspace, 'records', 'ledger.md')
        assert.equal(readFileSync(ledger, 'utf8'), 'before the backup')
      }

      // Their gateways go before the next framework's boot.
      for (const id of [clone.id, agentId]) {
        const removed = await client.delete(`/agents/${id}`).bearerToken(jwt)
        removed.assertStatus(200)
      }
      await agentLifecycle.settled()
    }).timeout(1_500_000)
  }
})
