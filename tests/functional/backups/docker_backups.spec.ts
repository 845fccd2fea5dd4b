import { lstatSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import { test } from '@japa/runner'
import Docker from 'dockerode'
import { dockerNames } from '#runtime/docker/container_spec'
import {
  downloadArchive,
  sha256,
  unpackEntries,
  uploadArchive,
} from '#tests/helpers/agent_archives'
import { noDockerEngine } from '#tests/helpers/docker_engine'
import { waitFor } from '#tests/helpers/processes'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'

/**
 * Backups on the docker driver (docs/backups.md "Docker"): the whole
 * service runs with AGENT_RUNTIME=docker and the fixture framework's image
 * built here. A running agent is paused by the engine for the copy of its
 * state volume (read on this host, never through a link the agent
 * planted), then restored into the volume owned by the container's user,
 * imported as another account's agent and cloned.
 */
test.group('Backups of docker agents', (group) => {
  let service: ServiceUnderFault | undefined
  const made: Array<{ token: string; agentId: string }> = []
  group.teardown(async () => {
    // Containers outlive the service (the engine's): each agent is deleted first.
    for (const { token, agentId } of made) {
      await service?.call(`/agents/${agentId}`, { method: 'DELETE', token }).catch(() => {})
    }
    const docker = new Docker()
    await waitFor(
      async () => {
        const left = await Promise.all(
          made.map(({ agentId }) =>
            docker
              .getContainer(dockerNames(agentId).container)
              .inspect()
              .then(
                () => true,
                () => false
              )
          )
        )
        return left.some(Boolean) ? undefined : true
      },
      { timeoutMs: 60_000, what: 'the containers to be removed' }
    ).catch(() => {})
    await service?.destroy()
  })

  test('a running docker agent: paused for the copy, downloaded, restored, imported, cloned')
    .skip(noDockerEngine, 'no Docker engine')
    .timeout(600_000)
    .run(async ({ assert }) => {
      service = await startServiceUnderFault({
        AGENT_RUNTIME: 'docker',
        AGENT_IMAGES: 'local',
        NODE_ENV: 'test',
        EXTRA_PLUGIN_DIRS: 'tests/fixtures/plugins',
        BACKUP_DAILY: 'off',
      })
      const docker = new Docker()
      const { token, email } = await service.signUpAccount()
      // Room for the clone (the free plan holds one agent).
      await service.query(`update users set tier = 'pro' where email = $1`, [email])
      const agentId = await service.createFixtureAgent(token, 'Docked')
      made.push({ token, agentId })
      await service.waitUntilRunning(token, agentId, 400_000)
      const key = await service.call('/auth/api-keys', {
        method: 'POST',
        token,
        json: { label: 'docker backups' },
      })
      const chat = (id: string, message: string) =>
        service!.call(`/api/v1/agents/${id}/chat`, {
          method: 'POST',
          token: key.body.data.key,
          json: { message },
        })
      const writeFile = (id: string, path: string, content: string) =>
        service!.call(`/agents/${id}/container-files`, {
          method: 'PUT',
          token,
          json: { path, content },
        })
      const readFile = async (id: string, path: string, as = token) => {
        const answer = await service!.call(
          `/agents/${id}/container-files/read?path=${encodeURIComponent(path)}`,
          { token: as }
        )
        return answer.status === 200 ? (answer.body.data.content as string) : undefined
      }
      const written = await writeFile(agentId, 'notes.txt', 'before the backup')
      assert.equal(written.status, 200)
      const remembered = await chat(agentId, '__remember__ color=blue')
      assert.equal(remembered.body.data?.content, 'remembered color', JSON.stringify(remembered))
      // A link the agent planted in its volume, to a host file: never followed.
      const volume = await docker.getVolume(dockerNames(agentId).volume).inspect()
      symlinkSync('/etc/shadow', join(volume.Mountpoint, 'workspace', 'leak.txt'))

      const container = docker.getContainer(dockerNames(agentId).container)
      const before = await container.inspect()
      const backup = await service.call(`/agents/${agentId}/backups`, {
        method: 'POST',
        token,
        json: {},
        timeoutMs: 120_000,
      })
      if (backup.status !== 201) {
        // Seen twice under a full parallel run, never alone: say what the engine and the service had.
        const volumeNow = await docker
          .getVolume(dockerNames(agentId).volume)
          .inspect()
          .then(
            () => 'exists',
            (error: Error) => error.message
          )
        throw new Error(
          `backup: ${backup.status} ${JSON.stringify(backup.body)}; the volume now: ${volumeNow}; ` +
            `the service said:\n${service.server.output().slice(-4000)}`
        )
      }
      const after = await container.inspect()
      assert.isTrue(after.State.Running, 'paused for the copy, never stopped')
      assert.isFalse(after.State.Paused, 'unpaused after it')
      assert.equal(after.State.StartedAt, before.State.StartedAt, 'the same run goes on')

      const download = await downloadArchive(
        service.server.url,
        token,
        `/agents/${agentId}/backups/${backup.body.data.id}/download`
      )
      assert.equal(sha256(download.bytes), backup.body.data.sha256)
      const entries = await unpackEntries(download.bytes)
      const byName = new Map(entries.map((entry) => [entry.name, entry.content]))
      assert.equal(byName.get('files/workspace/notes.txt')?.toString(), 'before the backup')
      assert.include(byName.get('files/state/memory.json')?.toString(), 'blue')
      // The volume is the state; its workspace/ is archived once, as the workspace.
      assert.isFalse([...byName.keys()].some((name) => name.startsWith('files/state/workspace')))
      const manifest = JSON.parse(byName.get('manifest.json')!.toString())
      assert.include(manifest.skipped, 'files/workspace/leak.txt')
      assert.include(manifest.skipped, 'files/state/fixture.json', 'rendered secrets left out')
      for (const [name, file] of Object.entries<any>(manifest.files)) {
        assert.equal(sha256(byName.get(name)!), file.sha256, name)
      }

      // Changed after the backup, then restored into the volume.
      await writeFile(agentId, 'notes.txt', 'changed after the backup')
      await writeFile(agentId, 'later.txt', 'made after the backup')
      const restored = await service.call(
        `/agents/${agentId}/backups/${backup.body.data.id}/restore`,
        { method: 'POST', token, timeoutMs: 120_000 }
      )
      assert.equal(restored.status, 200, JSON.stringify(restored.body))
      await service.waitUntilRunning(token, agentId, 120_000)
      assert.equal(await readFile(agentId, 'notes.txt'), 'before the backup')
      assert.isUndefined(await readFile(agentId, 'later.txt'))
      assert.isFalse(
        lstatSync(join(volume.Mountpoint, 'workspace', 'notes.txt')).uid === 0,
        "restored files are the container user's"
      )
      // The agent's own process writes there again (as its user, not root).
      const wrote = await chat(agentId, '__write__ after-restore.txt still mine')
      assert.equal(wrote.body.data?.content, 'wrote after-restore.txt', JSON.stringify(wrote))
      assert.equal(await readFile(agentId, 'after-restore.txt'), 'still mine')

      // Imported as another account's agent on this docker service, and cloned.
      const other = await service.signUp()
      const imported = await uploadArchive(service.server.url, other, download.bytes)
      assert.equal(imported.status, 201, JSON.stringify(imported.body))
      made.push({ token: other, agentId: imported.body.data.id })
      await service.waitUntilRunning(other, imported.body.data.id, 120_000)
      assert.equal(await readFile(imported.body.data.id, 'notes.txt', other), 'before the backup')

      const cloned = await service.call(`/agents/${agentId}/clone`, {
        method: 'POST',
        token,
        timeoutMs: 120_000,
      })
      assert.equal(cloned.status, 201, JSON.stringify(cloned.body))
      made.push({ token, agentId: cloned.body.data.id })
      await service.waitUntilRunning(token, cloned.body.data.id, 120_000)
      assert.equal(await readFile(cloned.body.data.id, 'after-restore.txt'), 'still mine')
    })
})
