/** What the knowledge routes take and answer (the source of their part of /openapi.json). */
import { t } from '#core/openapi/shapes'
import { defineContracts } from '#core/openapi/contracts'
import { ForbiddenException } from '#core/exceptions/api_exceptions'
import { uploadKnowledgeValidator } from '#knowledge/validators/knowledge_validators'

const knowledgeFile = t.named(
  'KnowledgeFile',
  t.object({ filename: t.string(), size: t.integer(), uploadedAt: t.dateTime() })
)

export default defineContracts({
  'agents.knowledge.index': {
    summary: 'Knowledge files of the agent',
    description: 'An array of knowledge files (size in UTF-8 bytes).',
    responses: { 200: t.array(knowledgeFile) },
    errors: [ForbiddenException],
  },
  'agents.knowledge.store': {
    summary: 'Upload a knowledge file',
    description:
      "Plain text up to 500 KB (UTF-8 bytes); a plain filename (no folders or control characters, at most 255 bytes); the same filename replaces the file. 400 beyond the plan's knowledge per agent. Works whether the agent runs, sleeps or is stopped.",
    body: uploadKnowledgeValidator,
    // Checked by the service (knowledge_service.checkFilename): a plain name, no folders.
    bodyRules: {
      properties: { filename: { pattern: '^[^/\\\\]*$', not: { enum: ['.', '..'] } } },
    },
    responses: { 201: knowledgeFile },
    errors: [ForbiddenException],
  },
  'agents.knowledge.destroy': {
    summary: 'Delete a knowledge file',
    description: '404 when the agent has no file of that name.',
    responses: { 200: t.object({ deleted: t.string() }) },
    errors: [ForbiddenException],
  },
})
