/**
 * Splits a reply into parts of at most `limit` characters, preferring to
 * cut at a paragraph, then a line, then a sentence, then a space, so each
 * part reads on its own. Never returns an empty part.
 */
export function splitMessage(text: string, limit: number): string[] {
  const parts: string[] = []
  let rest = text.trim()
  while (rest.length > limit) {
    const window = rest.slice(0, limit)
    const cut = [
      /\n\n(?![\s\S]*\n\n)/,
      /\n(?![\s\S]*\n)/,
      /[.!?]\s(?![\s\S]*[.!?]\s)/,
      /\s(?![\s\S]*\s)/,
    ]
      .map((pattern) => window.search(pattern))
      .find((index) => index > limit / 2)
    const end = cut === undefined ? limit : cut + 1
    parts.push(rest.slice(0, end).trim())
    rest = rest.slice(end).trim()
  }
  if (rest) parts.push(rest)
  return parts.length > 0 ? parts : ['…']
}
