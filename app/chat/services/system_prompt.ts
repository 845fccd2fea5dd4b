/**
 * The system prompt of the customer-key and hosted paths: the agent's
 * personality and instructions, then its knowledge files.
 *
 * Knowledge seam: the knowledge area registers `registerKnowledgeSource`,
 * which answers the passages relevant to the message (app/knowledge).
 */
export interface KnowledgeFile {
  filename: string
  content: string
}

export type KnowledgeSource = (agentId: string, query: string) => Promise<KnowledgeFile[]>

let knowledgeSource: KnowledgeSource | null = null
let knowledgePresence: string | null = null

/**
 * `presenceSql`: a boolean SQL expression over the `agents` row that is
 * false when the source can have nothing for that agent. The chat routes
 * read it with the agent row (same round trip) and skip the source then.
 */
export function registerKnowledgeSource(
  source: KnowledgeSource | null,
  options: { presenceSql?: string } = {}
): void {
  knowledgeSource = source
  knowledgePresence = source ? (options.presenceSql ?? null) : null
}

/** The registered presence expression, if any (see registerKnowledgeSource). */
export function knowledgePresenceSql(): string | null {
  return knowledgePresence
}

/** Knowledge text put into one prompt at most (characters). */
export const KNOWLEDGE_PROMPT_MAX = 100_000

export const DEFAULT_PERSONALITY = 'You are a helpful, friendly assistant.'

function text(value: unknown): string {
  return typeof value === 'string' ? value.trim() : ''
}

/** The knowledge passages relevant to `query`, as one system-prompt section ('' when none). */
export async function knowledgeSection(agentId: string, query: string): Promise<string> {
  const files = knowledgeSource ? await knowledgeSource(agentId, query) : []
  if (files.length === 0) return ''
  let budget = KNOWLEDGE_PROMPT_MAX
  const sections: string[] = []
  for (const file of files) {
    if (budget <= 0) break
    const body = file.content.slice(0, budget)
    budget -= body.length
    sections.push(`## ${file.filename}\n${body}`)
  }
  return `# Knowledge\nPassages of the owner's knowledge files relevant to the message; use them when they help.\n\n${sections.join('\n\n')}`
}

/** Personality, instructions, then the knowledge section (from knowledgeSection) when any. */
export function systemPromptFor(
  agent: {
    id: string
    name?: string
    config: Record<string, unknown>
  },
  knowledge = ''
): string {
  const parts = [text(agent.config.personality) || DEFAULT_PERSONALITY]
  const instructions = text(agent.config.instructions)
  if (instructions) parts.push(instructions)
  if (knowledge) parts.push(knowledge)
  return parts.join('\n\n')
}
