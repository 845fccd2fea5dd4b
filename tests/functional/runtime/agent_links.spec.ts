import { randomBytes, randomUUID } from 'node:crypto'
import {
  chmod,
  chown,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Assert } from '@japa/assert'
import { test } from '@japa/runner'
import { agentPaths, SERVICE_FOLDER } from '#runtime/agent_paths'
import { agentUid, bubblewrapWorks } from '#runtime/process/sandbox'
import {
  agentShell,
  asAgentOnHost,
  callFixtureOf,
  fixtureSpec,
  processHarness,
  waitFor,
  type RuntimeHarness,
} from '#tests/helpers/runtime'

/**
 * Issue 25: the service, as root, never follows a link an agent planted in
 * its folders (docs/security.md "Agent folders"). Each test first shows the
 * attack had something to take (a root-only canary that root reads, a file
 * root could overwrite), then plants the link as the agent, makes the
 * service act, and checks the canary never comes back, the target is
 * unchanged, and the normal function still works.
 */
const asRoot = process.getuid?.() === 0

/** What is at `path` itself (a link is not followed); undefined when nothing is. */
async function kindOf(path: string): Promise<'file' | 'folder' | 'link' | 'other' | undefined> {
  const info = await lstat(path).catch(() => undefined)
  if (!info) return undefined
  if (info.isSymbolicLink()) return 'link'
  if (info.isDirectory()) return 'folder'
  return info.isFile() ? 'file' : 'other'
}

async function ownerOf(path: string): Promise<number> {
  const info = await lstat(path)
  return info.uid
}

async function sortedNames(folder: string): Promise<string[]> {
  const names = await readdir(folder)
  return names.sort()
}

test.group('Agent folders: the service never follows a link an agent planted', (group) => {
  let harness: RuntimeHarness
  let outside: string
  let canary: string
  let canaryText: string
  let target: string

  group.each.setup(async () => {
    // Small log cap, so the agent's own output makes the service rotate it within the test.
    harness = await processHarness({ logMaxBytes: 4096 })
    // Root-only: what APP_KEY is to an attacker. And a file root may write, as /etc/cron.d is.
    outside = await mkdtemp(join(tmpdir(), 'agent-links-outside-'))
    await chmod(outside, 0o755)
    canary = join(outside, 'app_key')
    canaryText = `canary-${randomBytes(12).toString('hex')}`
    await writeFile(canary, canaryText, { mode: 0o600 })
    target = join(outside, 'cron-job')
    await writeFile(target, 'original\n', { mode: 0o644 })
    return async () => {
      await harness.cleanup()
      await rm(outside, { recursive: true, force: true })
    }
  })

  /** The attack had something to take: root reads the canary and may write the target. */
  async function attackTargetsAreThere(assert: Assert) {
    assert.equal(await readFile(canary, 'utf8'), canaryText)
    await writeFile(target, 'root can write here\n')
    assert.equal(await readFile(target, 'utf8'), 'root can write here\n')
    await writeFile(target, 'original\n')
  }

  async function startFixture(config: Record<string, unknown> = {}) {
    const agentId = randomUUID()
    await harness.runtime.ensureStarted(fixtureSpec(agentId, config), { waitReady: true })
    return agentId
  }

  /** A fixture agent that ran and stopped, its folder back in the layout before issue 25: the agent owned it. */
  async function stoppedInOldLayout() {
    const agentId = await startFixture()
    const paths = agentPaths(harness.agentsDir, agentId)
    await harness.runtime.stop(agentId)
    const uid = agentUid(agentId)
    await chown(paths.root, uid, uid)
    await chmod(paths.root, 0o700)
    return { agentId, paths, uid }
  }

  test('logs: an old layout whose runtime/ the agent replaced with links to a root-only file and a writable target shows neither; logs and rotation still work', async ({
    assert,
  }) => {
    await attackTargetsAreThere(assert)
    const { agentId, paths } = await stoppedInOldLayout()
    await mkdir(join(paths.root, 'runtime'), { mode: 0o700 })
    await writeFile(join(paths.root, 'runtime', 'output.log'), 'old output\n', { mode: 0o600 })
    // The reported attack, as the agent.
    asAgentOnHost(
      agentId,
      paths.root,
      `mv runtime runtime.orig && mkdir runtime && ln -s ${canary} runtime/output.log && ` +
        `ln -s ${target} runtime/output.log.1`
    )
    // Root following it would have read the canary.
    assert.equal(await readFile(join(paths.root, 'runtime', 'output.log'), 'utf8'), canaryText)

    await harness.runtime.ensureStarted(fixtureSpec(agentId), { waitReady: true })
    const top = await stat(paths.root)
    assert.equal(top.uid, 0, 'the top folder is the service’s again')
    assert.equal(top.mode & 0o7777, 0o711)
    assert.deepEqual(
      await sortedNames(paths.root),
      ['cache', 'home', 'runtime.orig', 'state', 'tmp', 'workspace'],
      'the planted runtime/ is gone (what the agent renamed is its own)'
    )

    // The agent's output makes the service rotate its log past the 4 KiB cap.
    await callFixtureOf(harness, agentId, '/log?lines=120&text=normal-output-line')
    await waitFor('a rotation', async () => await lstat(`${paths.logFile}.1`).catch(() => false))
    const logs = await harness.runtime.logs(agentId, { tail: 200 })
    assert.include(logs, 'normal-output-line')
    assert.notInclude(logs, canaryText)
    assert.equal(await readFile(target, 'utf8'), 'original\n', 'rotation never wrote the target')
    assert.equal(await kindOf(paths.logFile), 'file')
    assert.equal(paths.logFile, join(harness.agentsDir, SERVICE_FOLDER, agentId, 'output.log'))
  })
    .timeout(90_000)
    .skip(!asRoot || !bubblewrapWorks(), 'needs root and bubblewrap')

  test("the agent's own shell cannot reach the service's files of it or rename its top folder's entries", async ({
    assert,
  }) => {
    const agentId = await startFixture()
    const paths = agentPaths(harness.agentsDir, agentId)
    // What a shell would try: swap the log for a link, or a folder of its top folder.
    const planted = await agentShell(
      harness,
      agentId,
      `ln -s ${canary} ${paths.logFile}.1; ls ${paths.runtime}; mv ${paths.workspace} ${paths.root}/w2`
    )
    assert.notEqual(planted.code, 0)
    assert.isFalse((await kindOf(`${paths.logFile}.1`)) === 'link')
    assert.equal(await kindOf(paths.workspace), 'folder')
    const service = await stat(join(harness.agentsDir, SERVICE_FOLDER))
    assert.equal(service.uid, 0)
    assert.equal(service.mode & 0o777, 0o700)
    // Its folders are its own; their parent is not.
    assert.equal(await ownerOf(paths.workspace), agentUid(agentId))
    assert.equal(await ownerOf(paths.root), 0)
    assert.include(await harness.runtime.logs(agentId, { tail: 50 }), 'started')
  })
    .timeout(60_000)
    .skip(!asRoot || !bubblewrapWorks(), 'needs root and bubblewrap')

  test('SOUL.md linked to a host file: a config change re-renders it in the workspace, the target is unchanged; nothing is chowned through a link', async ({
    assert,
  }) => {
    await attackTargetsAreThere(assert)
    const agentId = await startFixture({ personality: 'First soul' })
    const paths = agentPaths(harness.agentsDir, agentId)
    const planted = await agentShell(
      harness,
      agentId,
      `ln -sf ${target} SOUL.md && ln -s ${target} owned-link && ls -l SOUL.md`
    )
    assert.equal(planted.code, 0, planted.stderr)
    assert.equal(await kindOf(join(paths.workspace, 'SOUL.md')), 'link')

    await harness.runtime.reconfigure(fixtureSpec(agentId, { personality: 'Second soul' }))
    await harness.runtime.waitUntilReady(agentId)
    assert.equal(await readFile(target, 'utf8'), 'original\n', 'the owner’s text never reached it')
    const soul = await lstat(join(paths.workspace, 'SOUL.md'))
    assert.isTrue(soul.isFile())
    assert.equal(soul.uid, agentUid(agentId), 'rendered as the agent’s own file')
    assert.equal(await readFile(join(paths.workspace, 'SOUL.md'), 'utf8'), 'Second soul')
    const seen = await agentShell(harness, agentId, 'cat SOUL.md')
    assert.equal(seen.stdout, 'Second soul')
    const targetInfo = await stat(target)
    assert.equal(targetInfo.uid, 0, 'the hand-over of its folders did not chown through a link')
    assert.equal(targetInfo.mode & 0o777, 0o644)
  })
    .timeout(90_000)
    .skip(!asRoot || !bubblewrapWorks(), 'needs root and bubblewrap')

  test('skills: a skills folder or a skill linked out of the workspace is replaced on install and unlinked on uninstall, never written or emptied through', async ({
    assert,
  }) => {
    await attackTargetsAreThere(assert)
    const agentId = await startFixture()
    const spec = fixtureSpec(agentId)
    const paths = agentPaths(harness.agentsDir, agentId)
    const hostDir = join(outside, 'host-dir')
    await mkdir(hostDir)
    await writeFile(join(hostDir, 'keep.txt'), 'keep')

    const planted = await agentShell(harness, agentId, `rm -rf skills; ln -s ${hostDir} skills`)
    assert.equal(planted.code, 0, planted.stderr)
    await harness.runtime.syncSkills(spec, {
      write: [{ id: 'demo', content: '# Demo skill' }],
      remove: [],
    })
    assert.deepEqual(await readdir(hostDir), ['keep.txt'], 'nothing written through the link')
    assert.equal(
      await readFile(join(paths.workspace, 'skills', 'demo', 'SKILL.md'), 'utf8'),
      '# Demo skill'
    )

    const swapped = await agentShell(
      harness,
      agentId,
      `rm -rf skills/demo; ln -s ${hostDir} skills/demo`
    )
    assert.equal(swapped.code, 0, swapped.stderr)
    await harness.runtime.syncSkills(spec, { write: [], remove: ['demo'] })
    assert.deepEqual(await readdir(hostDir), ['keep.txt'], 'uninstall removed the link only')
    assert.isUndefined(await lstat(join(paths.workspace, 'skills', 'demo')).catch(() => undefined))
  })
    .timeout(60_000)
    .skip(!asRoot || !bubblewrapWorks(), 'needs root and bubblewrap')

  test('files, knowledge mirror and memory through a link: refused or left out, never the canary; the files API still works', async ({
    assert,
  }) => {
    await attackTargetsAreThere(assert)
    const agentId = await startFixture()
    const paths = agentPaths(harness.agentsDir, agentId)
    const hostDir = join(outside, 'host-dir')
    await mkdir(hostDir)
    const planted = await agentShell(
      harness,
      agentId,
      `ln -s ${canary} notes.md && ln -s ${hostDir} knowledge && ` +
        `ln -sf ${canary} "$FIXTURE_STATE/memory.json"`
    )
    assert.equal(planted.code, 0, planted.stderr)

    const files = await harness.runtime.files(agentId)
    const read = await files.read('notes.md').catch((error: Error) => error)
    assert.instanceOf(read, Error)
    assert.notInclude(JSON.stringify(read), canaryText)
    // The knowledge mirror writes `knowledge/<name>` through the same file manager.
    const mirrored = await files.write('knowledge/doc.md', 'text').catch((error: Error) => error)
    assert.instanceOf(mirrored, Error)
    assert.deepEqual(await readdir(hostDir), [], 'nothing written through the link')
    const overwrite = await files.write('notes.md', 'mine').catch((error: Error) => error)
    assert.instanceOf(overwrite, Error)
    assert.equal(await readFile(canary, 'utf8'), canaryText)

    const memory = await harness.runtime.memory(agentId).catch((error: Error) => error)
    assert.notInclude(JSON.stringify(memory), canaryText)

    // Normal use: written as the agent's own file, read back, listed.
    await files.write('docs/readme.md', 'hello')
    const readBack = await files.read('docs/readme.md')
    assert.equal(readBack.content, 'hello')
    assert.equal(await ownerOf(join(paths.workspace, 'docs', 'readme.md')), agentUid(agentId))
    assert.include(
      await files.list('/').then((entries) => entries.map((entry) => entry.name)),
      'docs'
    )
  })
    .timeout(60_000)
    .skip(!asRoot || !bubblewrapWorks(), 'needs root and bubblewrap')

  test('an old layout whose workspace folder the agent replaced by a link: the files API at rest refuses it, the next start makes it a folder again', async ({
    assert,
  }) => {
    await attackTargetsAreThere(assert)
    const { agentId, paths } = await stoppedInOldLayout()
    asAgentOnHost(agentId, paths.root, `mv workspace w2 && ln -s ${outside} workspace`)

    const files = harness.runtime.filesAtRest(agentId)
    const read = await files.read('app_key').catch((error: Error) => error)
    assert.instanceOf(read, Error)
    assert.notInclude(JSON.stringify(read), canaryText)
    const write = await files.write('cron-job', 'pwned').catch((error: Error) => error)
    assert.instanceOf(write, Error)
    assert.equal(await readFile(target, 'utf8'), 'original\n')

    await harness.runtime.ensureStarted(fixtureSpec(agentId), { waitReady: true })
    assert.equal(await kindOf(paths.workspace), 'folder')
    assert.equal(await readFile(join(paths.workspace, 'SOUL.md'), 'utf8'), 'A test agent')
    assert.equal(await readFile(target, 'utf8'), 'original\n')
    assert.equal(await ownerOf(canary), 0)
  })
    .timeout(90_000)
    .skip(!asRoot || !bubblewrapWorks(), 'needs root and bubblewrap')
})
