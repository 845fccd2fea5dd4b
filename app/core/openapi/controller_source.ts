/**
 * Light reading of a controller's TypeScript source: the JSDoc block above a
 * method and the validator a method passes to `request.validateUsing`.
 * Text scanning is enough here (controllers are thin and follow one style);
 * it only ever adds detail to the document, never decides what routes exist.
 */

interface MethodLocation {
  start: number
  bodyStart: number
  bodyEnd: number
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

/** Index of the bracket closing the one at `open`, skipping strings and comments. */
function matchingBracket(source: string, open: number): number {
  const opening = source[open]
  const closing = opening === '(' ? ')' : '}'
  let depth = 0
  for (let i = open; i < source.length; i++) {
    const ch = source[i]
    if (ch === '/' && source[i + 1] === '/') {
      i = source.indexOf('\n', i)
      if (i === -1) return -1
      continue
    }
    if (ch === '/' && source[i + 1] === '*') {
      i = source.indexOf('*/', i + 2) + 1
      if (i === 0) return -1
      continue
    }
    if (ch === '"' || ch === "'" || ch === '`') {
      for (i++; i < source.length && source[i] !== ch; i++) if (source[i] === '\\') i++
      continue
    }
    if (ch === opening) depth++
    if (ch === closing && --depth === 0) return i
  }
  return -1
}

function locateMethod(source: string, action: string): MethodLocation | null {
  const declaration = new RegExp(
    `^[ \\t]*(?:public\\s+|static\\s+)?(?:async\\s+)?${escapeRegExp(action)}\\s*(?:<[^>]*>)?\\s*\\(`,
    'm'
  )
  const match = declaration.exec(source)
  if (!match) return null
  const paramsOpen = match.index + match[0].length - 1
  const paramsClose = matchingBracket(source, paramsOpen)
  if (paramsClose === -1) return null
  const bodyStart = source.indexOf('{', paramsClose)
  if (bodyStart === -1) return null
  const bodyEnd = matchingBracket(source, bodyStart)
  if (bodyEnd === -1) return null
  return { start: match.index, bodyStart, bodyEnd }
}

/**
 * Lines of the JSDoc block right above `action` (without `/**`, `*` and `*\/`),
 * for methods whose block does not begin with the `@<action>` line
 * adonis-autoswagger needs to find it.
 */
export function jsDocLines(source: string, action: string): string[] | null {
  const method = locateMethod(source, action)
  if (!method) return null
  const before = source.slice(0, method.start).trimEnd()
  if (!before.endsWith('*/')) return null
  const open = before.lastIndexOf('/**')
  if (open === -1) return null
  return before
    .slice(open + 3, -2)
    .split('\n')
    .map((line) => line.replace(/^\s*\*?\s?/, '').trimEnd())
    .filter((line) => line.trim() !== '')
}

/** Name of the validator `action` passes to `request.validateUsing(...)`, if any. */
export function validatorUsedBy(source: string, action: string): string | null {
  const method = locateMethod(source, action)
  if (!method) return null
  const body = source.slice(method.bodyStart, method.bodyEnd)
  const match = /validateUsing\(\s*([A-Za-z_$][\w$]*)/.exec(body)
  return match ? match[1] : null
}

/**
 * Fields the action's JSDoc names in `@nullable a, b`: response fields that
 * may be null although the example shows a value.
 */
export function nullableFieldsOf(source: string, action: string): string[] {
  const lines = jsDocLines(source, action) ?? []
  return lines
    .filter((line) => line.startsWith('@nullable '))
    .flatMap((line) => line.slice('@nullable '.length).split(/[\s,]+/))
    .filter(Boolean)
}
