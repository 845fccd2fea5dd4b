import env from '#start/env'
import app from '@adonisjs/core/services/app'
import { defineConfig } from '@adonisjs/lucid'

/**
 * One PostgreSQL connection. DATABASE_URL is always set by the time this
 * file loads: when the operator does not provide one, the bin/ entrypoints
 * start the embedded PostgreSQL and export its URL first.
 */
const dbConfig = defineConfig({
  connection: 'postgres',
  prettyPrintDebugQueries: false,
  connections: {
    postgres: {
      client: 'pg',
      connection: {
        connectionString: env.get('DATABASE_URL'),
      },
      pool: { min: 0, max: app.inTest ? 20 : 10 },
      // Models are written by hand per area; no generated database/schema.ts.
      schemaGeneration: { enabled: false },
      migrations: {
        naturalSort: true,
        paths: ['database/migrations'],
      },
    },
  },
})

export default dbConfig
