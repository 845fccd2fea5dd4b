import { randomUUID } from 'node:crypto'
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { agentPaths } from '#runtime/agent_paths'
import { catalogueSkill, skillFilesFor } from '#skills/services/skill_catalogue'
import { processHarness, type RuntimeHarness } from '#tests/helpers/runtime'

/**
 * Where each real framework finds installed skills, written by the process
 * driver without starting the framework (its start is covered by the
 * OpenClaw end-to-end test): OpenClaw in the workspace's skills/, Hermes in
 * HERMES_HOME/skills (the agent's state folder).
 */
test.group('Runtime / skills land where each framework loads them', (group) => {
  let harness: RuntimeHarness
  group.each.setup(async () => {
    harness = await processHarness()
    return () => harness.cleanup()
  })

  for (const [framework, root] of [
    ['openclaw', 'workspace'],
    ['hermes', 'state'],
  ] as const) {
    test(`${framework}: install writes <${root}>/skills/<id>/SKILL.md, uninstall removes it`, async ({
      assert,
    }) => {
      const agentId = randomUUID()
      const spec = {
        agentId,
        framework,
        config: {},
        modelProxy: { baseUrl: 'http://127.0.0.1:9/v1', token: 'proxy-token', model: 'local-dev' },
      }
      const folder = agentPaths(harness.agentsDir, agentId)[root]
      const file = join(folder, 'skills', 'code-review', 'SKILL.md')

      await harness.runtime.syncSkills(spec, { write: skillFilesFor(['code-review']), remove: [] })
      assert.equal(await readFile(file, 'utf8'), catalogueSkill('code-review')!.content)
      // The other root stays clean.
      const other = agentPaths(harness.agentsDir, agentId)[root === 'state' ? 'workspace' : 'state']
      assert.isFalse(existsSync(join(other, 'skills', 'code-review')))

      await harness.runtime.syncSkills(spec, { write: [], remove: ['code-review'] })
      assert.isFalse(existsSync(join(folder, 'skills', 'code-review')))
    })
  }
})
