import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseEnv } from 'node:util'
import { ensureAppKey } from '#core/bootstrap/app_key'
import { storageDir, projectRoot } from '#core/bootstrap/paths'
import {
  acquireEmbeddedPostgres,
  type EmbeddedPostgresHandle,
} from '#core/database/embedded_postgres'

export interface RuntimeEnvironment {
  /** Releases what this process started (the embedded database), if anything. */
  release(): Promise<void>
}

/**
 * Reads a variable from the process environment or the project's .env file,
 * the same two places the framework's Env loader looks.
 */
function configuredValue(root: string, name: string): string | undefined {
  if (process.env[name]) return process.env[name]
  const dotenv = join(root, '.env')
  if (!existsSync(dotenv)) return undefined
  return parseEnv(readFileSync(dotenv, 'utf8'))[name] || undefined
}

/**
 * Fills in the embedded defaults before the application boots: an APP_KEY
 * kept in storage/ and, without DATABASE_URL, the embedded PostgreSQL.
 */
export async function prepareRuntimeEnvironment(
  appRoot: URL,
  options: { database?: string; log?: (message: string) => void } = {}
): Promise<RuntimeEnvironment> {
  const root = projectRoot(appRoot)
  const storage = storageDir(appRoot)
  const log = options.log ?? ((message: string) => console.log(message))

  // CONTRACT.md defaults: listen on 127.0.0.1:3333 unless told otherwise.
  process.env.HOST = configuredValue(root, 'HOST') ?? '127.0.0.1'
  process.env.PORT = configuredValue(root, 'PORT') ?? '3333'

  if (!configuredValue(root, 'APP_KEY')) {
    process.env.APP_KEY = ensureAppKey(storage)
  }

  let embedded: EmbeddedPostgresHandle | undefined
  if (!configuredValue(root, 'DATABASE_URL')) {
    embedded = await acquireEmbeddedPostgres({
      dataDir: join(storage, 'postgres'),
      database: options.database ?? 'agent_host',
      log,
    })
    process.env.DATABASE_URL = embedded.url
  }

  return {
    async release() {
      await embedded?.release()
    },
  }
}
