import { randomUUID } from 'node:crypto'
import db from '@adonisjs/lucid/services/db'
import type { TransactionClientContract } from '@adonisjs/lucid/types/database'
import type Agent from '#agents/models/agent'
import { isSecretKey, type Config } from '#agents/services/config_secrets'
import { chunksOf } from '#knowledge/services/knowledge_service'
import { checkCron, checkTimezone, nextRunAfter } from '#schedules/services/schedule_times'
import { chatConfig } from '#config/chat'
import {
  AGENT_DOCUMENT,
  DATA_DOCUMENTS,
  refuseArchive,
  type AgentDocument,
  type ChatMessageDocument,
  type KnowledgeDocument,
  type ScheduleDocument,
} from '#backups/services/archive_format'
import { readDocument } from '#backups/services/archive_reader'

/**
 * The database side of an agent archive: what is read into its JSON
 * documents, and written back from them (restore, import, clone).
 * Channel connections, usage, feed events and versions are not part of it
 * (docs/backups.md "What an archive holds").
 */

/** The config without its secret values (an archive made without `includeSecrets`). */
export function withoutSecrets(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutSecrets)
  if (typeof value !== 'object' || value === null) return value
  const out: Config = {}
  for (const [key, inner] of Object.entries(value)) {
    if (!isSecretKey(key)) out[key] = withoutSecrets(inner)
  }
  return out
}

/** The archive's documents for `agent` (config as stored: secrets encrypted, or left out). */
export async function collectDocuments(
  agent: Agent,
  options: { includeSecrets: boolean }
): Promise<Record<string, unknown>> {
  const [schedules, knowledge, messages] = await Promise.all([
    db
      .from('agent_schedules')
      .where('agent_id', agent.id)
      .orderBy('created_at', 'asc')
      .select('name', 'cron', 'timezone', 'message', 'enabled'),
    db
      .from('knowledge_files')
      .where('agent_id', agent.id)
      .orderBy('filename', 'asc')
      .select('filename', 'content'),
    db
      .from('chat_messages')
      .where('agent_id', agent.id)
      .orderBy('created_at', 'asc')
      .orderBy('seq', 'asc')
      .select('role', 'content', 'created_at'),
  ])
  const document: AgentDocument = {
    name: agent.name,
    description: agent.description,
    avatarUrl: agent.avatarUrl,
    framework: agent.framework,
    config: options.includeSecrets ? agent.config : (withoutSecrets(agent.config) as Config),
    installedSkills: agent.installedSkills ?? [],
  }
  return {
    [AGENT_DOCUMENT]: document,
    [DATA_DOCUMENTS.schedules]: schedules satisfies ScheduleDocument[],
    [DATA_DOCUMENTS.knowledge]: knowledge satisfies KnowledgeDocument[],
    [DATA_DOCUMENTS.chatMessages]: messages.map((row): ChatMessageDocument => ({
      role: row.role,
      content: row.content,
      createdAt: new Date(row.created_at).toISOString(),
    })),
  }
}

// PostgreSQL refuses NUL in text; the rest of the service never stores one.
function text(value: unknown, what: string, maxBytes = 16 * 1024 * 1024): string {
  if (typeof value !== 'string' || value.includes('\u0000') || !value.isWellFormed()) {
    refuseArchive(`${what} is not valid text`)
  }
  if (Buffer.byteLength(value) > maxBytes) refuseArchive(`${what} is too long`)
  return value
}

function list<T>(value: unknown, what: string): T[] {
  if (!Array.isArray(value)) refuseArchive(`${what} is not a list`)
  return value as T[]
}

/** The agent document of an unpacked archive, checked. */
export async function readAgentDocument(staging: string): Promise<AgentDocument> {
  const document = await readDocument<Partial<AgentDocument> | null>(staging, AGENT_DOCUMENT, null)
  if (!document || typeof document !== 'object') refuseArchive('agent.json is not an object')
  const config = document.config
  if (typeof config !== 'object' || config === null || Array.isArray(config)) {
    refuseArchive('agent.json has no config object')
  }
  return {
    name: text(document.name, 'agent.json name', 200),
    description:
      document.description === null || document.description === undefined
        ? null
        : text(document.description, 'description'),
    avatarUrl:
      document.avatarUrl === null || document.avatarUrl === undefined
        ? null
        : text(document.avatarUrl, 'avatarUrl', 4096),
    framework: text(document.framework, 'agent.json framework', 100),
    config,
    installedSkills: list<unknown>(document.installedSkills ?? [], 'installedSkills').map((id) =>
      text(id, 'a skill id', 200)
    ),
  }
}

/**
 * Replaces the agent's schedules, knowledge and stored conversation by
 * those of the unpacked archive, in the caller's transaction.
 */
export async function writeDocuments(
  trx: TransactionClientContract,
  agentId: string,
  staging: string
): Promise<void> {
  const schedules = list<ScheduleDocument>(
    await readDocument(staging, DATA_DOCUMENTS.schedules, []),
    'schedules'
  )
  const knowledge = list<KnowledgeDocument>(
    await readDocument(staging, DATA_DOCUMENTS.knowledge, []),
    'knowledge'
  )
  const messages = list<ChatMessageDocument>(
    await readDocument(staging, DATA_DOCUMENTS.chatMessages, []),
    'chat messages'
  ).slice(-chatConfig.storedMessagesKept)

  await trx.from('agent_schedules').where('agent_id', agentId).delete()
  const now = new Date()
  for (const schedule of schedules) {
    const timezone = checkTimezone(text(schedule?.timezone ?? 'UTC', 'a schedule timezone', 64))
    const cron = checkCron(text(schedule?.cron, 'a schedule cron', 100), timezone)
    await trx.table('agent_schedules').insert({
      agent_id: agentId,
      name: text(schedule.name, 'a schedule name', 100),
      cron,
      timezone,
      message: text(schedule.message, 'a schedule message'),
      enabled: schedule.enabled !== false,
      next_run_at: nextRunAfter(cron, timezone, now),
    })
  }

  await trx.from('knowledge_files').where('agent_id', agentId).delete()
  await trx.from('knowledge_chunks').where('agent_id', agentId).delete()
  for (const file of knowledge) {
    const filename = text(file?.filename, 'a knowledge file name', 255)
    if (/[/\\]/.test(filename) || filename === '.' || filename === '..') {
      refuseArchive('a knowledge file name holds a folder')
    }
    const content = text(file.content, `knowledge file ${filename}`)
    const [row] = await trx
      .table('knowledge_files')
      .insert({
        agent_id: agentId,
        filename,
        content,
        size: Buffer.byteLength(content, 'utf8'),
        uploaded_at: now,
      })
      .returning(['id'])
    const chunks = chunksOf(content)
    if (chunks.length > 0) {
      await trx.table('knowledge_chunks').multiInsert(
        chunks.map((chunk, ordinal) => ({
          file_id: row.id,
          agent_id: agentId,
          ordinal,
          content: chunk,
        }))
      )
    }
  }

  await trx.from('chat_messages').where('agent_id', agentId).delete()
  const rows = messages.map((message) => {
    if (message?.role !== 'user' && message?.role !== 'assistant') {
      refuseArchive('a chat message has no role user or assistant')
    }
    const at = new Date(message.createdAt)
    return {
      id: randomUUID(),
      agent_id: agentId,
      role: message.role,
      content: text(message.content, 'a chat message'),
      created_at: Number.isNaN(at.getTime()) ? now : at,
    }
  })
  if (rows.length > 0) await trx.table('chat_messages').multiInsert(rows)
}
