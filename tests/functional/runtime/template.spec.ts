import { randomUUID } from 'node:crypto'
import {
  copyFileSync,
  existsSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { join, resolve } from 'node:path'
import { test } from '@japa/runner'
import { SERVICE_FOLDER, agentPaths } from '#runtime/agent_paths'
import { gatewayTokenFor } from '#runtime/credentials'
import { agentNetworkUnavailable } from '#runtime/process/agent_network/agent_networks'
import { criu } from '#runtime/process/checkpoint'
import { emptyTemplateCounts } from '#runtime/process/template'
import { markedAgentIdsUnder, markedProcesses, readRecord } from '#runtime/process/process_record'
import { agentUid, bubblewrapWorks } from '#runtime/process/sandbox'
import { fixtureSpec, processHarness, type RuntimeHarness } from '#tests/helpers/runtime'

/**
 * New agents from a template checkpoint (docs/runtime.md "New agents from a
 * template"), on the fixture framework with the real sandbox, CRIU and
 * network namespaces. The fixture's `__count__` lives in its process's
 * memory and its reply names when that process booted: an agent started
 * from the template answers with the template's boot time, a cold boot
 * with its own.
 */
const canTemplate =
  process.getuid?.() === 0 &&
  bubblewrapWorks() &&
  criu().path !== undefined &&
  agentNetworkUnavailable() === undefined
const skipReason =
  'needs root, bubblewrap, CRIU 4.2+ (scripts/install-criu.sh) and agent network namespaces'

async function startReady(harness: RuntimeHarness, agentId: string, config = {}) {
  await harness.runtime.ensureStarted(fixtureSpec(agentId, config))
  await harness.runtime.waitUntilReady(agentId, { timeoutMs: 30_000 })
}

async function say(harness: RuntimeHarness, agentId: string, content: string) {
  const reply = await harness.runtime.chat(agentId, {
    conversationId: 'template',
    messages: [{ role: 'user', content }],
  })
  return reply.content
}

async function count(harness: RuntimeHarness, agentId: string) {
  const match = /^count (\d+) since (\d+) pid (\d+)$/.exec(await say(harness, agentId, '__count__'))
  if (!match) throw new Error('unexpected reply')
  return { count: Number(match[1]), since: Number(match[2]) }
}

/** GET `path` of the agent's gateway with another agent's (or its own) token. */
async function getWithTokenOf(
  harness: RuntimeHarness,
  agentId: string,
  tokenOf: string,
  path: string
) {
  const info = await harness.runtime.status(agentId)
  const token = await gatewayTokenFor(agentPaths(harness.agentsDir, tokenOf).credentialsFile)
  const response = await fetch(`${info.baseUrl}${path}`, {
    headers: { authorization: `Bearer ${token}` },
  })
  return { status: response.status, body: (await response.json()) as Record<string, unknown> }
}

/** How many of the agent's runs started from the template. */
function templateStarts(harness: RuntimeHarness, agentId: string) {
  return harness.events.filter(
    (event) => event.type === 'started' && event.agentId === agentId && event.fromTemplate
  ).length
}

function startedFromTemplate(harness: RuntimeHarness, agentId: string) {
  return templateStarts(harness, agentId) > 0
}

/** When each template on disk was built. */
function builtTemplates(harness: RuntimeHarness): string[] {
  const dir = join(harness.agentsDir, SERVICE_FOLDER, '.templates')
  return readdirSync(dir)
    .filter((name) => existsSync(join(dir, name, 'template.json')))
    .map((name) => JSON.parse(readFileSync(join(dir, name, 'template.json'), 'utf8')).createdAt)
}

/** The folder of the one template on disk. */
function templateDirOf(harness: RuntimeHarness): string {
  const dir = join(harness.agentsDir, SERVICE_FOLDER, '.templates')
  const [key] = readdirSync(dir).filter((name) => existsSync(join(dir, name, 'template.json')))
  return join(dir, key)
}

/** A sleeping agent's checkpoint: its meta, and the images its `parent` link names (if any). */
function checkpointOf(harness: RuntimeHarness, agentId: string) {
  const dir = agentPaths(harness.agentsDir, agentId).checkpoint
  const link = join(dir, 'parent')
  return {
    meta: JSON.parse(readFileSync(join(dir, 'checkpoint.json'), 'utf8')),
    parent: existsSync(link) ? resolve(dir, readlinkSync(link)) : undefined,
  }
}

/** A template built, then a new agent started (from it, where all goes well): its id. */
async function agentFromTemplate(harness: RuntimeHarness): Promise<string> {
  await buildTemplate(harness)
  const agentId = randomUUID()
  await startReady(harness, agentId)
  return agentId
}

/** The first agent boots cold (counted `missing`) and the template is built meanwhile. */
async function buildTemplate(harness: RuntimeHarness) {
  const first = randomUUID()
  await startReady(harness, first)
  await harness.driver.whenTemplatesBuilt()
  return first
}

test.group('Runtime / new agents from a template checkpoint (process driver, CRIU)', (group) => {
  let harness: RuntimeHarness
  group.each.setup(async () => {
    harness = await processHarness({ templates: true })
    return () => harness.cleanup()
  })

  test('a new agent starts from the template as itself: its uid, folders and token; it sleeps and wakes', async ({
    assert,
  }) => {
    const first = await buildTemplate(harness)
    assert.deepEqual(harness.driver.templateCounts().coldBoots.missing, 1, 'counted')
    assert.isFalse(startedFromTemplate(harness, first))
    const { since: firstSince } = await count(harness, first)

    const agentId = randomUUID()
    await startReady(harness, agentId)
    assert.equal(harness.driver.templateCounts().restored, 1)
    assert.isTrue(startedFromTemplate(harness, agentId))

    // Its config file is its own (another inode on the host) yet shows the identity the
    // template saw at its boot; a second agent from the same images draws other random bytes.
    const second = randomUUID()
    await startReady(harness, second)
    assert.isTrue(startedFromTemplate(harness, second))
    const identity = await getWithTokenOf(harness, agentId, agentId, '/identity')
    const secondIdentity = await getWithTokenOf(harness, second, second, '/identity')
    assert.equal(identity.body.now, identity.body.atBoot)
    assert.equal(secondIdentity.body.now, identity.body.atBoot)
    // Two files on the host, so two inodes, yet both show the template's: at least one is
    // mapped. (Not "each differs from the template's": its file is gone with its run, and
    // the kernel may give its inode number to one of the copies, as it did once in a run.)
    const onHost = (id: string) => {
      const info = statSync(join(agentPaths(harness.agentsDir, id).state, 'fixture.json'), {
        bigint: true,
      })
      return `${info.dev}:${info.ino}`
    }
    assert.notEqual(onHost(agentId), onHost(second))
    assert.notEqual(secondIdentity.body.random, identity.body.random)
    await harness.runtime.stop(second)

    const log = readFileSync(agentPaths(harness.agentsDir, agentId).logFile, 'utf8')
    assert.include(log, 'started fixture from its template')
    assert.include(log, 'reloaded its config', 'it took its own config after the restore')

    // The chat goes to its container: the framework's own in-memory counter answers, and the
    // process answering booted before the agent existed (the template's boot), not with it.
    const counted = await count(harness, agentId)
    assert.equal(counted.count, 1)
    assert.notEqual(counted.since, firstSince)
    assert.include(
      readFileSync(agentPaths(harness.agentsDir, agentId).logFile, 'utf8'),
      'message=__count__'
    )

    // Its own uid, its own token; the other agent's token is refused.
    const own = await getWithTokenOf(harness, agentId, agentId, '/whoami')
    assert.equal(own.status, 200)
    assert.equal(own.body.uid, agentUid(agentId))
    const other = await getWithTokenOf(harness, agentId, first, '/whoami')
    assert.equal(other.status, 401)
    const record = await readRecord(agentPaths(harness.agentsDir, agentId).recordFile)
    const framework = markedProcesses(agentId).filter((pid) => pid !== record!.pid)
    assert.lengthOf(framework, 1, 'its framework carries its own marker, no other agent does')
    const status = readFileSync(`/proc/${framework[0]}/status`, 'utf8')
    assert.match(
      status,
      new RegExp(`^Uid:\\s+${agentUid(agentId)}\\s+${agentUid(agentId)}\\s`, 'm')
    )
    assert.match(status, /^NoNewPrivs:\s+1$/m)
    assert.match(status, /^Seccomp:\s+2$/m)

    // Files it writes are its own, in its own workspace.
    assert.equal(
      await say(harness, agentId, '__write__ notes/mine.txt hello'),
      'wrote notes/mine.txt'
    )
    const written = join(agentPaths(harness.agentsDir, agentId).workspace, 'notes', 'mine.txt')
    assert.equal(readFileSync(written, 'utf8'), 'hello')
    assert.equal(statSync(written).uid, agentUid(agentId))
    assert.isFalse(existsSync(join(agentPaths(harness.agentsDir, first).workspace, 'notes')))

    // It sleeps with a checkpoint of its own and wakes restored, counting on.
    await harness.runtime.sleep(agentId)
    assert.deepEqual(markedProcesses(agentId), [])
    // The checkpoint keeps only the pages that are not the template's (checkpoint_delta.ts).
    const checkpoint = checkpointOf(harness, agentId)
    assert.isString(checkpoint.meta.templateIdentity, 'a delta on the template')
    assert.equal(checkpoint.parent, templateDirOf(harness))
    await startReady(harness, agentId)
    const woken = await count(harness, agentId)
    assert.equal(woken.count, 2, 'its memory came back')
    assert.equal(woken.since, counted.since)
    const ownAfter = await getWithTokenOf(harness, agentId, agentId, '/whoami')
    assert.equal(ownAfter.status, 200)
    const otherAfter = await getWithTokenOf(harness, agentId, first, '/whoami')
    assert.equal(otherAfter.status, 401)

    // And stops gracefully, leaving nothing.
    await harness.runtime.stop(agentId)
    assert.deepEqual(markedProcesses(agentId), [])
    assert.include(
      readFileSync(agentPaths(harness.agentsDir, agentId).logFile, 'utf8'),
      'received SIGTERM'
    )
  })
    .skip(!canTemplate, skipReason)
    .timeout(180_000)

  test('a sleep reports the agent asleep once its processes end, before its checkpoint is stored; a wake meanwhile waits and restores it', async ({
    assert,
  }) => {
    const agentId = await agentFromTemplate(harness)
    const before = await count(harness, agentId)
    const metaFile = join(agentPaths(harness.agentsDir, agentId).checkpoint, 'checkpoint.json')
    let atAsleep: { processes: number[]; stored: boolean; resumes: boolean } | undefined
    let wake: Promise<void> | undefined
    const stopListening = harness.runtime.onEvent((event) => {
      if (event.type !== 'sleeping' || event.agentId !== agentId) return
      atAsleep = {
        processes: markedProcesses(agentId),
        stored: existsSync(metaFile),
        resumes: harness.driver.resumes(agentId),
      }
      wake = startReady(harness, agentId)
    })
    await harness.runtime.sleep(agentId)
    stopListening()
    assert.deepEqual(atAsleep, { processes: [], stored: false, resumes: true })
    await wake
    const after = await count(harness, agentId)
    assert.deepEqual(
      after,
      { count: before.count + 1, since: before.since },
      'restored, not booted'
    )
    assert.include(
      readFileSync(agentPaths(harness.agentsDir, agentId).logFile, 'utf8'),
      'asleep: checkpointed to disk'
    )
  })
    .skip(!canTemplate, skipReason)
    .timeout(120_000)

  test('an agent put to sleep before any turn starts from its template again, even after a service restart; after a turn it sleeps with a checkpoint', async ({
    assert,
  }) => {
    const agentId = await agentFromTemplate(harness)
    const paths = agentPaths(harness.agentsDir, agentId)
    // A gateway GET, not a turn: the boot time its memory holds (the template's).
    const { body: first } = await getWithTokenOf(harness, agentId, agentId, '/whoami')
    const slept = new Promise<void>((done) => {
      const stopListening = harness.runtime.onEvent((event) => {
        if (event.type === 'sleeping' && event.agentId === agentId) done(stopListening())
      })
    })
    await harness.runtime.sleep(agentId)
    await slept
    assert.deepEqual(markedProcesses(agentId), [])
    assert.isFalse(existsSync(join(paths.checkpoint, 'checkpoint.json')), 'no checkpoint taken')
    assert.isTrue(existsSync(paths.startsAsNewFile))
    assert.isTrue(harness.driver.resumes(agentId), 'its wake restores, in the queue too')
    assert.include(readFileSync(paths.logFile, 'utf8'), 'asleep: still as its template started it')

    await startReady(harness, agentId)
    assert.equal(
      templateStarts(harness, agentId),
      2,
      readFileSync(paths.logFile, 'utf8').slice(-3000)
    )
    assert.isFalse(existsSync(paths.startsAsNewFile))
    const again = await getWithTokenOf(harness, agentId, agentId, '/whoami')
    assert.deepEqual([again.status, again.body.uid], [200, agentUid(agentId)])
    assert.equal(again.body.startedAt, first.startedAt, "the template's memory again")

    // Sent a turn, the run is its own: its sleep checkpoints it and the wake goes on counting.
    const counted = await count(harness, agentId)
    await harness.runtime.sleep(agentId)
    assert.isString(checkpointOf(harness, agentId).meta.templateIdentity, 'a delta checkpoint')
    assert.isFalse(existsSync(paths.startsAsNewFile))
    await startReady(harness, agentId)
    assert.deepEqual(await count(harness, agentId), { ...counted, count: counted.count + 1 })

    // What the marker says outlives the service: the next one starts it as a new agent, from
    // the template. (Unless the template is of another launch by then: the restarted service's
    // model proxy relay may have had to take another port where other services on this host
    // hold its own, which changes the launch. It then says so and boots, as for a new agent.)
    const other = randomUUID()
    await startReady(harness, other)
    await harness.runtime.sleep(other)
    await harness.restartService()
    await startReady(harness, other)
    const log = readFileSync(agentPaths(harness.agentsDir, other).logFile, 'utf8')
    const fromTemplate = log.match(/started fixture from its template/g)?.length ?? 0
    assert.isTrue(
      fromTemplate === 2 ||
        log.includes('no template start (the template of fixture is of another'),
      log.slice(-3000)
    )
  })
    .skip(!canTemplate, skipReason)
    .timeout(180_000)

  test("a sleep well after its template start is still a delta: the copy's link to the template outlives its images", async ({
    assert,
  }) => {
    const agentId = await agentFromTemplate(harness)
    const copy = agentPaths(harness.agentsDir, agentId).templateCopy
    const counted = await count(harness, agentId)
    // Its images go ~15 s after the restore (restores.ts); the link stays.
    const deadline = Date.now() + 40_000
    while (readdirSync(copy).length > 1 && Date.now() < deadline) {
      await new Promise((done) => setTimeout(done, 500))
    }
    assert.deepEqual(readdirSync(copy), ['parent'])
    await harness.runtime.sleep(agentId)
    const checkpoint = checkpointOf(harness, agentId)
    assert.isString(checkpoint.meta.templateIdentity, 'a delta on the template')
    assert.equal(checkpoint.parent, templateDirOf(harness))
    await startReady(harness, agentId)
    assert.deepEqual(await count(harness, agentId), { ...counted, count: counted.count + 1 })
  })
    .skip(!canTemplate, skipReason)
    .timeout(180_000)

  test('a template built ahead at service start: agents created meanwhile wait for it, none boots cold', async ({
    assert,
  }) => {
    const plugin = harness.registry.framework('fixture')
    // The template's own run is never one of the driver's agents (placement leases only those).
    const seenLive = new Set<string>()
    const watch = setInterval(
      () => harness.driver.liveAgents().forEach((id) => seenLive.add(id)),
      10
    )
    // What the service does at start (prepareFrameworks with a default new agent's spec).
    const ahead = harness.driver.prepareFrameworks([plugin], () => fixtureSpec(randomUUID()))
    // Created while it builds: each waits for the template rather than booting beside it.
    const waiting = [randomUUID(), randomUUID()]
    await Promise.all(waiting.map((agentId) => startReady(harness, agentId)))
    await ahead
    for (const agentId of waiting) assert.isTrue(startedFromTemplate(harness, agentId))
    assert.equal(harness.driver.templateCounts().restored, 2)
    assert.deepEqual(harness.driver.templateCounts().coldBoots, emptyTemplateCounts().coldBoots)
    clearInterval(watch)
    assert.sameMembers([...seenLive], waiting)
    const log = readFileSync(agentPaths(harness.agentsDir, waiting[0]).logFile, 'utf8')
    assert.include(log, 'template start')

    // A later start of the service finds it on disk: nothing is built again.
    const before = builtTemplates(harness)
    assert.lengthOf(before, 1)
    await harness.driver.prepareFrameworks([plugin], () => fixtureSpec(randomUUID()))
    assert.deepEqual(builtTemplates(harness), before)
    const next = randomUUID()
    await startReady(harness, next)
    assert.isTrue(startedFromTemplate(harness, next))
    assert.equal(harness.driver.templateCounts().restored, 3)
  })
    .skip(!canTemplate, skipReason)
    .timeout(180_000)

  test('two agents from one template draw random values of their own', async ({ assert }) => {
    await buildTemplate(harness)
    const draws: Array<Record<string, unknown>> = []
    for (const agentId of [randomUUID(), randomUUID()]) {
      await startReady(harness, agentId)
      assert.isTrue(startedFromTemplate(harness, agentId))
      const { body } = await getWithTokenOf(harness, agentId, agentId, '/identity')
      draws.push(body)
    }
    const [one, two] = draws
    // The fixture drew each kind once at its boot, before the template's dump: Node.js and V8
    // kept the rest of their batches in memory, which both copies have.
    assert.notEqual(one.random, two.random, 'crypto.randomBytes (OpenSSL, reseeded by the shim)')
    assert.notEqual(one.uuid, two.uuid, 'crypto.randomUUID')
    assert.notEqual(one.webUuid, two.webUuid, 'globalThis.crypto.randomUUID')
    assert.notEqual(one.int, two.int, 'crypto.randomInt')
    assert.notEqual(one.math, two.math, 'Math.random')
  })
    .skip(!canTemplate, skipReason)
    .timeout(120_000)

  test('a template CRIU cannot restore is built again after two failures in a row', async ({
    assert,
  }) => {
    await buildTemplate(harness)
    // Its images damaged as a file its copies cannot open would: CRIU refuses every copy.
    writeFileSync(join(templateDirOf(harness), 'files.img'), 'not an image')
    for (const [index, agentId] of [randomUUID(), randomUUID()].entries()) {
      await startReady(harness, agentId)
      assert.isFalse(startedFromTemplate(harness, agentId))
      assert.equal(harness.driver.templateCounts().coldBoots.restore, index + 1)
      const booted = await count(harness, agentId)
      assert.equal(booted.count, 1, 'it booted and answers')
    }
    await harness.driver.whenTemplatesBuilt()
    const next = randomUUID()
    await startReady(harness, next)
    assert.isTrue(startedFromTemplate(harness, next), 'from the template built again')
  })
    .skip(!canTemplate, skipReason)
    .timeout(120_000)

  test('a delta checkpoint whose template was written anew meanwhile is never restored: the agent boots', async ({
    assert,
  }) => {
    const agentId = await agentFromTemplate(harness)
    assert.isTrue(startedFromTemplate(harness, agentId))
    const counted = await count(harness, agentId)
    await harness.runtime.sleep(agentId)
    const { meta, parent } = checkpointOf(harness, agentId)
    assert.isString(meta.templateIdentity)

    // A rebuild writes the template's images as new files (here with the same bytes: the
    // identity, not the content, is what a wake checks).
    for (const name of readdirSync(parent!).filter((file) => /^pages-\d+\.img$/.test(file))) {
      copyFileSync(join(parent!, name), join(parent!, `${name}.new`))
      renameSync(join(parent!, `${name}.new`), join(parent!, name))
    }
    await startReady(harness, agentId)
    const booted = await count(harness, agentId)
    assert.equal(booted.count, 1, 'a fresh boot counts from one')
    assert.notEqual(booted.since, counted.since)
    assert.include(
      readFileSync(agentPaths(harness.agentsDir, agentId).logFile, 'utf8'),
      'its checkpoint is a delta on a template rebuilt or removed since: booting'
    )
  })
    .skip(!canTemplate, skipReason)
    .timeout(180_000)

  test('a stale template (a new framework version) is a counted cold boot, and is built again', async ({
    assert,
  }) => {
    await buildTemplate(harness)
    const plugin = harness.registry.framework('fixture')
    const version = plugin.version
    ;(plugin as { version: string }).version = `${version}-next`
    try {
      const agentId = randomUUID()
      await startReady(harness, agentId)
      assert.equal(harness.driver.templateCounts().coldBoots.stale, 1)
      assert.isFalse(startedFromTemplate(harness, agentId))
      const booted = await count(harness, agentId)
      assert.equal(booted.count, 1, 'it answers, booted')
      assert.include(
        readFileSync(agentPaths(harness.agentsDir, agentId).logFile, 'utf8'),
        'no template start (the template of fixture is of another launch'
      )

      // The next one starts from the template of the new version.
      await harness.driver.whenTemplatesBuilt()
      const next = randomUUID()
      await startReady(harness, next)
      assert.isTrue(startedFromTemplate(harness, next))
      assert.equal(harness.driver.templateCounts().restored, 1)
    } finally {
      ;(plugin as { version: string }).version = version
    }
  })
    .skip(!canTemplate, skipReason)
    .timeout(180_000)

  test("a template-started agent is found as this service's after a restart: adopted, stopped", async ({
    assert,
  }) => {
    const agentId = await agentFromTemplate(harness)
    assert.isTrue(startedFromTemplate(harness, agentId))
    const { since } = await count(harness, agentId)
    // Its HOME is /agent/home: the agents folder is named in its environment instead.
    assert.isTrue(markedAgentIdsUnder(harness.agentsDir).has(agentId))

    await harness.restartService()
    await startReady(harness, agentId)
    const after = await count(harness, agentId)
    assert.equal(after.since, since, 'the same run, adopted')
    assert.equal(after.count, 2)
    await harness.runtime.stop(agentId)
    assert.deepEqual(markedProcesses(agentId), [])
  })
    .skip(!canTemplate, skipReason)
    .timeout(120_000)

  test('an agent whose id cannot replace the marker boots cold, counted', async ({ assert }) => {
    await buildTemplate(harness)
    // Not a UUID: 37 characters where the template's marker has 36.
    const agentId = `x${randomUUID()}`
    await startReady(harness, agentId)
    assert.isFalse(startedFromTemplate(harness, agentId))
    assert.equal(harness.driver.templateCounts().coldBoots.identity, 1)
    const booted = await count(harness, agentId)
    assert.equal(booted.count, 1)
  })
    .skip(!canTemplate, skipReason)
    .timeout(120_000)

  test('an agent whose config changes the boot never starts from a template', async ({
    assert,
  }) => {
    await buildTemplate(harness)
    const agentId = randomUUID()
    await startReady(harness, agentId, { readyDelayMs: 100 })
    assert.isFalse(startedFromTemplate(harness, agentId))
    assert.equal(harness.driver.templateCounts().restored, 0)
  })
    .skip(!canTemplate, skipReason)
    .timeout(120_000)
})
