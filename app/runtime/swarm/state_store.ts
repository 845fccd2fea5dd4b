import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto'
import { Readable, Transform } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { createGunzip, createGzip } from 'node:zlib'
import type { RenderedFile } from '#plugins/types'

/** One statement inside a transaction; bindings are `?` placeholders (knex style). */
export type StateQuery = (sql: string, bindings?: unknown[]) => Promise<{ rows: any[] }>

/** Where swarm agents' state rows live (PostgreSQL: large objects exist only inside a transaction). */
export interface StateDatabase {
  transaction<T>(work: (query: StateQuery) => Promise<T>): Promise<T>
}

/** An agent's row in `swarm_agent_states`. */
export interface AgentStateRow {
  generation: number
  sha256: string | null
  bytes: number | null
  takenAt: Date | null
  /** The task whose volume the snapshot was taken from (null: none yet). */
  snapshotOf: string | null
  /** Taken after that task ended: nothing it wrote is missing. */
  final: boolean
  /** The newest task whose gate was opened (it ran the framework on the restored state). */
  releasedTask: string | null
}

const INV_WRITE = 0x20000
const INV_READ = 0x40000
const CHUNK = 512 * 1024
/** PostgreSQL's "lock_not_available" (FOR UPDATE NOWAIT on a locked row). */
const LOCK_NOT_AVAILABLE = '55P03'

/** `iv | tag | ciphertext` of `plain` under AES-256-GCM. */
function seal(key: Buffer, plain: Buffer): Buffer {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', key, iv)
  const body = Buffer.concat([cipher.update(plain), cipher.final()])
  return Buffer.concat([iv, cipher.getAuthTag(), body])
}

function open(key: Buffer, sealed: Buffer): Buffer {
  const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, 12))
  decipher.setAuthTag(sealed.subarray(12, 28))
  return Buffer.concat([decipher.update(sealed.subarray(28)), decipher.final()])
}

/** The first row's `column`. */
async function valueOf(query: StateQuery, column: string, sql: string, bindings?: unknown[]) {
  const { rows } = await query(sql, bindings)
  return rows[0][column]
}

function rowOf(raw: any): AgentStateRow {
  return {
    generation: Number(raw.generation),
    sha256: raw.snapshot_sha256 ?? null,
    bytes: raw.snapshot_bytes === null ? null : Number(raw.snapshot_bytes),
    takenAt: raw.taken_at ? new Date(raw.taken_at) : null,
    snapshotOf: raw.snapshot_of ?? null,
    final: Boolean(raw.final),
    releasedTask: raw.released_task ?? null,
  }
}

/**
 * One agent's state row, locked for the transaction it was opened in:
 * every change of an agent's state (a snapshot, a restore, a release) holds
 * this lock, so two service instances never interleave them.
 */
export class AgentState {
  constructor(
    private readonly query: StateQuery,
    private readonly key: Buffer,
    readonly agentId: string,
    private raw: any,
    private readonly maxBytes: number
  ) {}

  get row(): AgentStateRow {
    return rowOf(this.raw)
  }

  async #update(fields: Record<string, unknown>) {
    const names = Object.keys(fields)
    const result = await this.query(
      `update swarm_agent_states set ${names.map((name) => `${name} = ?`).join(', ')},
         updated_at = now() where agent_id = ? returning *`,
      [...names.map((name) => fields[name]), this.agentId]
    )
    this.raw = result.rows[0]
  }

  /** The task `taskId` runs the framework now (its gate is open). */
  async released(taskId: string) {
    await this.#update({ released_task: taskId, final: false })
  }

  /** Files were changed in the last task's volume at rest: the next settle snapshots it again. */
  async dirty() {
    await this.#update({ final: false })
  }

  /** The files every new task gets after the restore (config, skills), encrypted at rest. */
  async setRendered(files: RenderedFile[]) {
    await this.#update({ rendered: seal(this.key, Buffer.from(JSON.stringify(files))) })
  }

  rendered(): RenderedFile[] {
    if (!this.raw.rendered) return []
    return JSON.parse(open(this.key, this.raw.rendered).toString('utf8')) as RenderedFile[]
  }

  /**
   * Stores the tar stream `archive` (the state volume's contents) as the
   * newest snapshot: gzip, AES-256-GCM, one large object. Returns false when
   * it equals the newest one byte for byte (only its time moves then).
   */
  async writeSnapshot(
    archive: NodeJS.ReadableStream,
    source: { taskId: string; final: boolean }
  ): Promise<boolean> {
    const hash = createHash('sha256')
    let bytes = 0
    const maxBytes = this.maxBytes
    const measure = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        bytes += chunk.length
        if (bytes > maxBytes) return done(new Error(`state larger than ${maxBytes} bytes`))
        hash.update(chunk)
        done(null, chunk)
      },
    })
    const iv = randomBytes(12)
    const cipher = createCipheriv('aes-256-gcm', this.key, iv)
    const oid = Number(await valueOf(this.query, 'oid', 'select lo_create(0) as oid'))
    const fd = await valueOf(this.query, 'fd', 'select lo_open(?, ?) as fd', [oid, INV_WRITE])
    const query = this.query
    let pending: Buffer[] = []
    let size = 0
    await pipeline(
      archive as NodeJS.ReadableStream,
      measure,
      createGzip({ level: 3 }),
      cipher,
      async function (sealed: AsyncIterable<Buffer>) {
        for await (const chunk of sealed) {
          pending.push(chunk)
          size += chunk.length
          if (size < CHUNK) continue
          await query('select lowrite(?, ?)', [fd, Buffer.concat(pending)])
          pending = []
          size = 0
        }
        if (size > 0) await query('select lowrite(?, ?)', [fd, Buffer.concat(pending)])
      }
    )
    await this.query('select lo_close(?)', [fd])
    const sha256 = hash.digest('hex')
    if (sha256 === this.raw.snapshot_sha256 && this.raw.snapshot_oid !== null) {
      await this.query('select lo_unlink(?)', [oid])
      await this.#update({ taken_at: new Date(), snapshot_of: source.taskId, final: source.final })
      return false
    }
    if (this.raw.snapshot_oid !== null) {
      await this.query('select lo_unlink(?)', [this.raw.snapshot_oid])
    }
    await this.#update({
      generation: Number(this.raw.generation) + 1,
      snapshot_oid: oid,
      snapshot_iv: iv,
      snapshot_tag: cipher.getAuthTag(),
      snapshot_sha256: sha256,
      snapshot_bytes: bytes,
      snapshot_of: source.taskId,
      taken_at: new Date(),
      final: source.final,
    })
    return true
  }

  /** The newest snapshot as the tar stream it was taken as, or undefined when there is none. */
  async readSnapshot(): Promise<Readable | undefined> {
    if (this.raw.snapshot_oid === null) return undefined
    const oid = this.raw.snapshot_oid
    const fd = await valueOf(this.query, 'fd', 'select lo_open(?, ?) as fd', [oid, INV_READ])
    const query = this.query
    const chunks = async function* () {
      for (;;) {
        const chunk: Buffer = await valueOf(query, 'chunk', 'select loread(?, ?) as chunk', [
          fd,
          CHUNK,
        ])
        if (chunk.length === 0) break
        yield chunk
      }
      await query('select lo_close(?)', [fd])
    }
    const decipher = createDecipheriv('aes-256-gcm', this.key, this.raw.snapshot_iv)
    decipher.setAuthTag(this.raw.snapshot_tag)
    const gunzip = createGunzip()
    pipeline(Readable.from(chunks()), decipher, gunzip).catch((error) => gunzip.destroy(error))
    return gunzip
  }
}

/**
 * Swarm agents' state where every node and every service instance reaches
 * it: the table `swarm_agent_states`, snapshots as PostgreSQL large objects
 * (docs/runtime.md "Many machines"). Snapshots and rendered files are
 * encrypted with a key of the service's (derived from APP_KEY): the
 * database alone does not give an agent's files or secrets away.
 */
export class StateStore {
  constructor(
    private readonly db: StateDatabase,
    private readonly key: Buffer,
    private readonly maxBytes = 1024 * 1024 * 1024
  ) {}

  /**
   * Runs `work` holding the agent's row (made when missing). With `wait:
   * false` it gives up at once when another transaction holds the row and
   * answers undefined.
   */
  async withAgent<T>(
    agentId: string,
    options: { wait: boolean },
    work: (state: AgentState) => Promise<T>
  ): Promise<T | undefined> {
    try {
      return await this.db.transaction(async (query) => {
        await query(
          'insert into swarm_agent_states (agent_id) values (?) on conflict (agent_id) do nothing',
          [agentId]
        )
        const { rows } = await query(
          `select * from swarm_agent_states where agent_id = ? for update${options.wait ? '' : ' nowait'}`,
          [agentId]
        )
        return work(new AgentState(query, this.key, agentId, rows[0], this.maxBytes))
      })
    } catch (error) {
      if (!options.wait && (error as { code?: string }).code === LOCK_NOT_AVAILABLE)
        return undefined
      throw error
    }
  }

  /** The row as it stands, without locking it (undefined: no state kept yet). */
  async peek(agentId: string): Promise<AgentStateRow | undefined> {
    return this.db.transaction(async (query) => {
      const { rows } = await query('select * from swarm_agent_states where agent_id = ?', [agentId])
      return rows[0] ? rowOf(rows[0]) : undefined
    })
  }

  /** Forgets the agent's state (its snapshot's large object with it). */
  async remove(agentId: string): Promise<void> {
    await this.db.transaction(async (query) => {
      await query(
        `select lo_unlink(snapshot_oid) from swarm_agent_states
          where agent_id = ? and snapshot_oid is not null`,
        [agentId]
      )
      await query('delete from swarm_agent_states where agent_id = ?', [agentId])
    })
  }

  /** Each agent with state kept here, and the task last released for it. */
  async releasedTasks(): Promise<Map<string, string | null>> {
    return this.db.transaction(async (query) => {
      const { rows } = await query('select agent_id, released_task from swarm_agent_states')
      return new Map(rows.map((row) => [String(row.agent_id), row.released_task ?? null]))
    })
  }
}
