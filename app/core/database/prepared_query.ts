import db from '@adonisjs/lucid/services/db'

export interface PreparedResult<Row> {
  rows: Row[]
  rowCount: number | null
}

interface PgClient {
  query<Row>(config: {
    name: string
    text: string
    values: unknown[]
  }): Promise<PreparedResult<Row>>
}

/**
 * Runs one statement as a named (server-side prepared) statement on a
 * connection of the default pool. The query builder sends unnamed
 * statements, which PostgreSQL parses and plans on every call: for the
 * multi-CTE statements on every hosted chat's path that planning costs
 * about as much as executing them. A named statement is parsed once per
 * pooled connection (node-postgres remembers which connections know it).
 * `text` uses $1..$n placeholders and must be the same for one `name`.
 */
export async function preparedQuery<Row = Record<string, unknown>>(
  name: string,
  text: string,
  values: unknown[]
): Promise<PreparedResult<Row>> {
  const client = db.connection().getWriteClient().client
  const connection = (await client.acquireConnection()) as PgClient
  try {
    return await connection.query<Row>({ name, text, values })
  } finally {
    await client.releaseConnection(connection)
  }
}
