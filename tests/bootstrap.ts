import { assert } from '@japa/assert'
import { ApiClient, apiClient } from '@japa/api-client'
import app from '@adonisjs/core/services/app'
import type { Config } from '@japa/runner/types'
import { pluginAdonisJS } from '@japa/plugin-adonisjs'
import testUtils from '@adonisjs/core/services/test_utils'
import { spec } from '@japa/runner/reporters'
import { fileTimingsReporter } from '#tests/parallel/file_timings_reporter'

export const plugins: Config['plugins'] = [assert(), apiClient(), pluginAdonisJS(app)]

/**
 * A chat's store and settlement finish just after its answer (after_reply.ts);
 * the service's own reads wait for them, a test's direct database reads do
 * not. So every answer of the in-process server is followed by its writes
 * before the test goes on (tests/functional/chat/after_reply.spec.ts checks
 * the service's own waits with a plain HTTP client instead).
 */
ApiClient.teardown(async () => {
  const { afterReply } = await import('#core/http/after_reply')
  await afterReply.drain()
})

/**
 * Under bin/test_parallel.ts (TEST_TIMINGS_OUT set): the spec reporter, and
 * each file's time and counts written for the parallel runner.
 */
export const reporters: Config['reporters'] = process.env.TEST_TIMINGS_OUT
  ? {
      activated: ['spec', 'file-timings'],
      list: [spec(), fileTimingsReporter(process.env.TEST_TIMINGS_OUT)],
    }
  : undefined

/**
 * Setup: apply migrations (under the same advisory lock as the server) and
 * start the HTTP server, so functional tests speak real HTTP to it.
 */
export const runnerHooks: Required<Pick<Config, 'setup' | 'teardown'>> = {
  setup: [
    async () => {
      const { migrateToLatest } = await import('#core/database/migrations')
      const db = await app.container.make('lucid.db')
      await migrateToLatest(app, db)
    },
  ],
  teardown: [],
}

export const configureSuite: Config['configureSuite'] = (suite) => {
  if (suite.name === 'redteam') {
    // The attack x sandbox-mode table, printed and written to storage/ at the end.
    return suite.teardown(async () => {
      const { writeRedTeamReport } = await import('#tests/helpers/red_team')
      await writeRedTeamReport()
    })
  }
  if (['browser', 'functional', 'e2e', 'faults'].includes(suite.name)) {
    return suite.setup(() => testUtils.httpServer().start())
  }
}
