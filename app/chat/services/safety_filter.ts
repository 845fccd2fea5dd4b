import { chatConfig } from '#config/chat'
import { ContentBlockedException } from '#core/exceptions/api_exceptions'

/**
 * The 422 safety filter: a small, explicit blocklist of phrases
 * (`chatConfig.blockedPhrases`). Text and phrases are compared as
 * lower-case words without accents or punctuation, so `Make  RICIN!` is
 * caught and `americium` is not caught by `csam`-like fragments.
 */
function normalize(text: string): string {
  return ` ${text
    .normalize('NFKD')
    .replace(/\p{M}+/gu, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim()} `
}

let compiled: { source: string[]; phrases: string[] } | undefined

function phrases(): string[] {
  const source = chatConfig.blockedPhrases
  if (compiled?.source !== source) {
    compiled = {
      source,
      phrases: source.map(normalize).filter((phrase) => phrase.trim().length > 0),
    }
  }
  return compiled.phrases
}

/** True when the text contains a blocked phrase. */
export function isBlocked(text: string): boolean {
  const list = phrases()
  if (list.length === 0) return false
  const normalized = normalize(text)
  return list.some((phrase) => normalized.includes(phrase))
}

/** Throws 422 CONTENT_BLOCKED when any of the texts is blocked. */
export function assertAllowed(...texts: (string | null | undefined)[]): void {
  for (const text of texts) {
    if (text && isBlocked(text)) {
      throw new ContentBlockedException(
        'The message was blocked by the content safety filter; nothing was stored or charged'
      )
    }
  }
}
