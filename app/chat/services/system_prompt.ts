/**
 * The system prompt of the customer-key and hosted paths: the agent's
 * personality and instructions, then its knowledge files.
 *
 * Knowledge seam: the knowledge-base area (a later issue) registers where
 * its files come from with `registerKnowledgeSource`; until then agents
 * have no knowledge and the prompt is personality + instructions only.
 */
export interface KnowledgeFile {
  filename: string
  content: string
}

export type KnowledgeSource = (agentId: string) => Promise<KnowledgeFile[]>

let knowledgeSource: KnowledgeSource | null = null

export function registerKnowledgeSource(source: KnowledgeSource | null): void {
  knowledgeSource = source
}

/** Knowledge text put into one prompt at most (characters). */
export const KNOWLEDGE_PROMPT_MAX = 100_000

export const DEFAULT_PERSONALITY = 'You are a helpful, friendly assistant.'

function text(value: unknown): string {
  return typeof value === 'string' ? value.trim() : ''
}

export async function systemPromptFor(agent: {
  id: string
  name?: string
  config: Record<string, unknown>
}): Promise<string> {
  const parts = [text(agent.config.personality) || DEFAULT_PERSONALITY]
  const instructions = text(agent.config.instructions)
  if (instructions) parts.push(instructions)
  const files = knowledgeSource ? await knowledgeSource(agent.id) : []
  if (files.length > 0) {
    let budget = KNOWLEDGE_PROMPT_MAX
    const sections: string[] = []
    for (const file of files) {
      if (budget <= 0) break
      const body = file.content.slice(0, budget)
      budget -= body.length
      sections.push(`## ${file.filename}\n${body}`)
    }
    parts.push(`# Knowledge\nUse these files when they are relevant.\n\n${sections.join('\n\n')}`)
  }
  return parts.join('\n\n')
}
