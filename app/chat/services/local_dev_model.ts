import { randomBytes } from 'node:crypto'
import { LOCAL_DEV_MODEL } from '#config/model_proxy'
import { estimateTokens, type TokenUsage } from '#chat/services/metering'

/**
 * The built-in development model that answers hosted requests when no
 * MODEL_API_URL is configured: deterministic (the same messages give the
 * same reply), free, streams, answers in the OpenAI wire format and says
 * plainly what it is. It is not a language model.
 */
export const LOCAL_DEV_NOTICE =
  'This is local-dev, the built-in development model of this service, not a real AI model ' +
  '(no MODEL_API_URL is configured).'

/** The newest user message's text (parts of a multi-part message joined). */
export function lastUserText(messages: unknown): string {
  if (!Array.isArray(messages)) return ''
  for (let i = messages.length - 1; i >= 0; i--) {
    const entry = messages[i]
    if (entry?.role !== 'user') continue
    if (typeof entry.content === 'string') return entry.content
    if (Array.isArray(entry.content)) {
      return entry.content
        .map((part: any) => (typeof part?.text === 'string' ? part.text : ''))
        .join(' ')
    }
  }
  return ''
}

/**
 * Framework context blocks a framework wraps around what the user typed, e.g.
 * OpenClaw's `<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>> ... <<<END_OPENCLAW_INTERNAL_CONTEXT>>>`.
 * Any `<<<BEGIN_NAME>>>` up to its `<<<END_NAME>>>` (or to the end, when
 * the end marker is missing) goes; stray end markers too.
 */
const WRAPPER_BLOCK = /<<<BEGIN_([A-Z0-9_]+)>>>[\s\S]*?(?:<<<END_\1>>>|$)/g
const STRAY_MARKER = /<<<(?:BEGIN|END)_[A-Z0-9_]+>>>/g

/** What the user typed: the text outside any framework's wrapper blocks. */
export function withoutFrameworkContext(text: string): string {
  return text.replace(WRAPPER_BLOCK, ' ').replace(STRAY_MARKER, ' ')
}

export function localDevText(messages: unknown): string {
  const said = withoutFrameworkContext(lastUserText(messages)).replace(/\s+/g, ' ').trim()
  const quoted = said.length > 200 ? `${said.slice(0, 200)}...` : said
  return quoted ? `${LOCAL_DEV_NOTICE} You said: "${quoted}"` : LOCAL_DEV_NOTICE
}

function usageFor(messages: unknown, text: string): TokenUsage {
  return {
    inputTokens: estimateTokens(JSON.stringify(messages ?? [])),
    outputTokens: estimateTokens(text),
  }
}

function wireUsage(usage: TokenUsage) {
  return {
    prompt_tokens: usage.inputTokens,
    completion_tokens: usage.outputTokens,
    total_tokens: usage.inputTokens + usage.outputTokens,
  }
}

function completionId() {
  return `chatcmpl-local-${randomBytes(9).toString('base64url')}`
}

/** A whole `chat.completion` answer (`text`: what it says, by default local-dev's reply). */
export function localDevCompletion(messages: unknown, text = localDevText(messages)) {
  return {
    id: completionId(),
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: LOCAL_DEV_MODEL,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: text, refusal: null },
        logprobs: null,
        finish_reason: 'stop',
      },
    ],
    usage: wireUsage(usageFor(messages, text)),
  }
}

/** `chat.completion.chunk` payloads, word by word, ending with the usage chunk. */
export function* localDevChunks(
  messages: unknown,
  text = localDevText(messages)
): Generator<Record<string, unknown>> {
  const id = completionId()
  const created = Math.floor(Date.now() / 1000)
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model: LOCAL_DEV_MODEL,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  })
  yield chunk({ role: 'assistant', content: '' })
  for (const piece of text.split(/(?<= )/)) yield chunk({ content: piece })
  yield chunk({}, 'stop')
  yield {
    id,
    object: 'chat.completion.chunk',
    created,
    model: LOCAL_DEV_MODEL,
    choices: [],
    usage: wireUsage(usageFor(messages, text)),
  }
}

export function localDevModelEntry() {
  return { id: LOCAL_DEV_MODEL, object: 'model', created: 0, owned_by: 'agent-host' }
}
