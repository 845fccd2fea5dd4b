import app from '@adonisjs/core/services/app'
import db from '@adonisjs/lucid/services/db'
import logger from '@adonisjs/core/services/logger'
import { NotFoundException, ValidationException } from '#core/exceptions/api_exceptions'
import { tierPlan } from '#config/plans'
import type User from '#identity/models/user'
import type Agent from '#agents/models/agent'
import type { KnowledgeFile } from '#chat/services/system_prompt'

/**
 * Knowledge files (docs/knowledge.md): plain text in PostgreSQL, split into
 * chunks indexed for full-text search, and mirrored into the agent's
 * workspace (`knowledge/<filename>`) where its framework can read them.
 * At chat time the passages relevant to the question go to the model.
 */
export const MAX_KNOWLEDGE_FILE_BYTES = 500 * 1024
const MAX_FILENAME_BYTES = 255
const CHUNK_CHARS = 800
/** Passages given to the model per message. */
const PASSAGES_PER_MESSAGE = 5
const MIRROR_FOLDER = 'knowledge'

function present(row: { filename: string; size: number; uploaded_at: Date }) {
  return {
    filename: row.filename,
    size: row.size,
    uploadedAt: new Date(row.uploaded_at).toISOString(),
  }
}

/** A plain file name: no folders, no control characters, at most 255 bytes. */
function checkFilename(filename: string): string {
  if (Buffer.byteLength(filename, 'utf8') > MAX_FILENAME_BYTES) {
    throw new ValidationException(`filename: at most ${MAX_FILENAME_BYTES} bytes`)
  }
  if (/[/\\]/.test(filename) || filename === '.' || filename === '..') {
    throw new ValidationException('filename: a plain name, without folders')
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(filename)) {
    throw new ValidationException('filename: control characters are not allowed')
  }
  return filename
}

/** Paragraphs packed into chunks of about CHUNK_CHARS characters. */
export function chunksOf(content: string): string[] {
  const chunks: string[] = []
  let current = ''
  for (const paragraph of content.split(/\n\s*\n/)) {
    const text = paragraph.trim()
    if (!text) continue
    if (current && current.length + text.length + 2 > CHUNK_CHARS) {
      chunks.push(current)
      current = ''
    }
    if (text.length > CHUNK_CHARS) {
      for (let i = 0; i < text.length; i += CHUNK_CHARS) chunks.push(text.slice(i, i + CHUNK_CHARS))
      continue
    }
    current = current ? `${current}\n\n${text}` : text
  }
  if (current) chunks.push(current)
  return chunks
}

/** Best effort: the database is the source of truth; the workspace copy is for the framework. */
async function mirror(agent: Agent, filename: string, content: string | null) {
  try {
    const runtime = await app.container.make('runtime')
    const running = await runtime.isRunning(agent.id)
    const files = running ? await runtime.files(agent.id) : runtime.filesAtRest(agent.id)
    const path = `${MIRROR_FOLDER}/${filename}`
    if (content === null) await files.delete(path)
    else await files.write(path, content)
  } catch (error) {
    logger.debug({ agentId: agent.id, err: error }, 'knowledge: workspace copy not updated')
  }
}

// The routes' functions take the agent their controller found and authorized
// (AgentPolicy); `owner` is that agent's owner, whose plan sets the limits.

export async function listKnowledge(agent: Agent) {
  const rows = await db
    .from('knowledge_files')
    .where('agent_id', agent.id)
    .orderBy('filename', 'asc')
    .select('filename', 'size', 'uploaded_at')
  return rows.map(present)
}

export async function uploadKnowledge(
  owner: User,
  agent: Agent,
  input: { filename: string; content: string }
) {
  const filename = checkFilename(input.filename)
  const size = Buffer.byteLength(input.content, 'utf8')
  if (size > MAX_KNOWLEDGE_FILE_BYTES) {
    throw new ValidationException(
      `content: at most ${MAX_KNOWLEDGE_FILE_BYTES} bytes of UTF-8 text (this is ${size})`
    )
  }
  const plan = tierPlan(owner.effectiveTier)
  const row = await db.transaction(async (trx) => {
    const others = await trx
      .from('knowledge_files')
      .where('agent_id', agent.id)
      .whereNot('filename', filename)
      .sum('size as total')
      .first()
    if (Number(others?.total ?? 0) + size > plan.maxKnowledgeBytes) {
      throw new ValidationException(
        `The ${plan.name} plan allows ${plan.maxKnowledgeBytes / 1024 / 1024} MB of knowledge per agent`
      )
    }
    // The same filename replaces the file.
    const [file] = await trx
      .insertQuery()
      .table('knowledge_files')
      .insert({
        agent_id: agent.id,
        filename,
        content: input.content,
        size,
        uploaded_at: new Date(),
      })
      .onConflict(['agent_id', 'filename'])
      .merge(['content', 'size', 'uploaded_at'])
      .returning(['id', 'filename', 'size', 'uploaded_at'])
    await trx.from('knowledge_chunks').where('file_id', file.id).delete()
    const chunks = chunksOf(input.content)
    if (chunks.length > 0) {
      await trx.table('knowledge_chunks').multiInsert(
        chunks.map((content, ordinal) => ({
          file_id: file.id,
          agent_id: agent.id,
          ordinal,
          content,
        }))
      )
    }
    return file
  })
  await mirror(agent, filename, input.content)
  return present(row)
}

export async function deleteKnowledge(agent: Agent, filename: unknown) {
  const name = typeof filename === 'string' ? filename : ''
  const deleted = await db
    .from('knowledge_files')
    .where({ agent_id: agent.id, filename: name })
    .delete()
    .returning('id')
  if (deleted.length === 0) throw new NotFoundException('Knowledge file not found')
  await mirror(agent, name, null)
  return { deleted: name }
}

/**
 * The passages of the agent's knowledge most relevant to `query`
 * (PostgreSQL full-text search, any of its words, ranked), for the model's
 * context. None when nothing matches.
 */
export async function relevantPassages(agentId: string, query: string): Promise<KnowledgeFile[]> {
  if (!query.trim()) return []
  const result = await db.rawQuery(
    `with q as (
       select nullif(replace(plainto_tsquery('english', ?)::text, ' & ', ' | '), '')::tsquery as query)
     select f.filename, c.content
       from knowledge_chunks c
       join knowledge_files f on f.id = c.file_id, q
      where c.agent_id = ? and q.query is not null and c.tsv @@ q.query
      order by ts_rank(c.tsv, q.query) desc, c.ordinal
      limit ?`,
    [query, agentId, PASSAGES_PER_MESSAGE]
  )
  return result.rows as KnowledgeFile[]
}
