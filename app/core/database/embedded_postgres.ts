/**
 * Embedded PostgreSQL (placeholder interface; implementation in progress).
 */
export interface EmbeddedPostgresOptions {
  /** Cluster folder (initdb'd on first use). */
  dataDir: string
  /** Database to create if missing; the URL points at it. */
  database: string
  log: (message: string) => void
}

export interface EmbeddedPostgresHandle {
  url: string
  /** Drops this process's hold; stops the server when no other holder remains. */
  release(): Promise<void>
}

export async function acquireEmbeddedPostgres(
  _options: EmbeddedPostgresOptions
): Promise<EmbeddedPostgresHandle> {
  throw new Error('embedded PostgreSQL not implemented yet: set DATABASE_URL')
}
