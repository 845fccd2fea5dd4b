import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { AgentNotRunningException } from '#core/exceptions/api_exceptions'
import { agentWorkspaceFiles } from '#runtime/process/agent_files'

/**
 * An agent that has never started has no workspace yet; on a new storage no
 * agent has, and the agents folder itself is missing. Either way a file
 * write or read is refused as "not running yet" (409), never a 500.
 */
test.group('Runtime / workspace files of an agent that has not started once', (group) => {
  let root: string
  group.each.setup(async () => {
    root = await mkdtemp(join(tmpdir(), 'workspace-not-yet-'))
    return () => rm(root, { recursive: true, force: true })
  })

  for (const [label, makeAgentsDir] of [
    ['the agents folder is missing (a new storage)', false],
    ['its own folders are missing', true],
  ] as const) {
    test(label, async ({ assert }) => {
      const agentsDir = join(root, 'agents')
      if (makeAgentsDir) await mkdir(agentsDir)
      const files = agentWorkspaceFiles(agentsDir, join(root, 'cache'), 'a1b2c3')
      await assert.rejects(() => files.write('notes.txt', 'hello'), AgentNotRunningException)
      await assert.rejects(() => files.list('/'), AgentNotRunningException)
    })
  }
})
