import type { TransactionClientContract } from '@adonisjs/lucid/types/database'
import { NotFoundException } from '#core/exceptions/api_exceptions'
import AgentConfigVersion from '#agents/models/agent_config_version'
import { isUuid } from '#core/http/ids'
import { maskSecrets } from '#agents/services/config_secrets'

/** Snapshots listed at most (newest first). */
export const SNAPSHOT_LIST_MAX = 100

export interface VersionEntry {
  version: number
  message: string
  createdAt: string
}

export interface SnapshotEntry extends VersionEntry {
  id: string
}

export interface VersionDetail extends SnapshotEntry {
  /** The full config of that version, secrets masked. */
  config: Record<string, unknown>
}

function present(row: AgentConfigVersion): SnapshotEntry {
  return {
    id: row.id,
    version: row.version,
    message: row.message,
    createdAt: row.createdAt.toUTC().toISO()!,
  }
}

/**
 * Stores the next version of an agent's config (secrets already
 * encrypted). Call inside the transaction that locked the agent row, so
 * numbers are taken one at a time.
 */
export async function recordVersion(
  trx: TransactionClientContract,
  agentId: string,
  storedConfig: Record<string, unknown>,
  message: string
): Promise<AgentConfigVersion> {
  const row = await trx
    .from('agent_config_versions')
    .where('agent_id', agentId)
    .max('version as latest')
    .first()
  const version = Number(row?.latest ?? 0) + 1
  return AgentConfigVersion.create(
    { agentId, version, message, config: storedConfig },
    { client: trx }
  )
}

/** `GET /agents/:id/versions`: newest first. */
export async function listVersions(
  agentId: string,
  page: { limit: number; offset: number }
): Promise<VersionEntry[]> {
  const rows = await AgentConfigVersion.query()
    .where('agent_id', agentId)
    .orderBy('version', 'desc')
    .limit(page.limit)
    .offset(page.offset)
  return rows.map((row) => ({
    version: row.version,
    message: row.message,
    createdAt: row.createdAt.toUTC().toISO()!,
  }))
}

/** `GET /agents/:id/config-snapshots`: the newest versions with their snapshot ids. */
export async function listSnapshots(agentId: string): Promise<SnapshotEntry[]> {
  const rows = await AgentConfigVersion.query()
    .where('agent_id', agentId)
    .orderBy('version', 'desc')
    .limit(SNAPSHOT_LIST_MAX)
  return rows.map(present)
}

/** One version by number; 404 when the agent has no such version. */
export async function findVersion(
  agentId: string,
  version: unknown,
  trx?: TransactionClientContract
): Promise<AgentConfigVersion> {
  const number =
    typeof version === 'string' && /^\d{1,9}$/.test(version) ? Number(version) : Number.NaN
  const row = Number.isSafeInteger(number)
    ? await AgentConfigVersion.query({ client: trx })
        .where('agent_id', agentId)
        .where('version', number)
        .first()
    : null
  if (!row) throw new NotFoundException('Version not found')
  return row
}

/** One snapshot by id; 404 when unknown, malformed or another agent's. */
export async function findSnapshot(
  agentId: string,
  snapshotId: unknown,
  trx?: TransactionClientContract
): Promise<AgentConfigVersion> {
  const row = isUuid(snapshotId)
    ? await AgentConfigVersion.query({ client: trx })
        .where('agent_id', agentId)
        .where('id', snapshotId.toLowerCase())
        .first()
    : null
  if (!row) throw new NotFoundException('Snapshot not found')
  return row
}

export function presentVersionDetail(row: AgentConfigVersion): VersionDetail {
  return { ...present(row), config: maskSecrets(row.config) }
}
