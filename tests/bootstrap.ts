import { assert } from '@japa/assert'
import { apiClient } from '@japa/api-client'
import app from '@adonisjs/core/services/app'
import type { Config } from '@japa/runner/types'
import { pluginAdonisJS } from '@japa/plugin-adonisjs'
import testUtils from '@adonisjs/core/services/test_utils'

export const plugins: Config['plugins'] = [assert(), apiClient(), pluginAdonisJS(app)]

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
