import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { existsSync } from 'node:fs'
import { utimes } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { test } from '@japa/runner'
import { precopyAgentFolders, settleAgentFolders } from '#backups/services/folder_snapshot'
import { SEPARATE_FOLDERS } from '#backups/services/folder_walk'

/**
 * The two passes of a running agent's raw copy (folder_snapshot.ts): what
 * changed between the first pass (agent running) and the second (agent
 * frozen) is copied again, what did not is kept as copied, what went is
 * removed, so the copy ends as the folders were at the second pass.
 */
test.group('Backups: the raw copy of an agent in two passes', (group) => {
  let base: string
  group.each.setup(() => {
    base = mkdtempSync(join(tmpdir(), 'snapshot-passes-'))
    return () => rmSync(base, { recursive: true, force: true })
  })

  test('the second pass brings the copy to the folders as they are then', async ({ assert }) => {
    const agent = join(base, 'agent')
    const workspace = join(agent, 'workspace')
    mkdirSync(join(workspace, 'becomes-a-file'), { recursive: true })
    mkdirSync(join(agent, 'state'))
    writeFileSync(join(workspace, 'static.txt'), 'never touched')
    writeFileSync(join(workspace, 'rewritten.txt'), 'first words')
    writeFileSync(join(workspace, 'deleted.txt'), 'soon gone')
    writeFileSync(join(workspace, 'linked.txt'), 'soon a link')
    writeFileSync(join(agent, 'state', 'secret.env'), 'TOKEN=1')
    // Older than the first pass by more than the clock's slack: "not written since".
    await sleep(1100)
    const host = { root: agent, folders: SEPARATE_FOLDERS }
    const dest = join(base, 'copy')
    const leftOut = ['files/state/secret.env']
    const precopy = await precopyAgentFolders(host, dest, leftOut)
    assert.equal(readFileSync(join(dest, 'workspace', 'rewritten.txt'), 'utf8'), 'first words')
    assert.isFalse(existsSync(join(dest, 'state', 'secret.env')))
    const staticCopy = statSync(join(dest, 'workspace', 'static.txt')).ino

    // Between the passes (the agent still running).
    const rewritten = join(workspace, 'rewritten.txt')
    const before = statSync(rewritten)
    writeFileSync(rewritten, 'other words') // the same size...
    await utimes(rewritten, before.atime, before.mtime) // ...and its old modification time
    rmSync(join(workspace, 'deleted.txt'))
    rmSync(join(workspace, 'linked.txt'))
    symlinkSync('/etc/passwd', join(workspace, 'linked.txt'))
    rmSync(join(workspace, 'becomes-a-file'), { recursive: true })
    writeFileSync(join(workspace, 'becomes-a-file'), 'a file now')
    writeFileSync(join(workspace, 'new.txt'), 'made between')

    const skipped = await settleAgentFolders(host, precopy, leftOut)
    const copy = (name: string) => join(dest, 'workspace', name)
    assert.equal(readFileSync(copy('rewritten.txt'), 'utf8'), 'other words', 'its change time told')
    assert.equal(readFileSync(copy('static.txt'), 'utf8'), 'never touched')
    assert.equal(
      statSync(copy('static.txt')).ino,
      staticCopy,
      'an unchanged file is not copied again'
    )
    assert.isFalse(existsSync(copy('deleted.txt')))
    assert.isFalse(existsSync(copy('linked.txt')), 'now a link: out of the copy, never followed')
    assert.equal(readFileSync(copy('becomes-a-file'), 'utf8'), 'a file now')
    assert.equal(readFileSync(copy('new.txt'), 'utf8'), 'made between')
    assert.sameMembers(skipped, ['files/workspace/linked.txt', 'files/state/secret.env'])
  }).timeout(20_000)
})
