/**
 * Small helpers over JSON Schema / OpenAPI 3.1 schema objects. Documents are
 * plain JSON, so they are typed loosely on purpose.
 */
export type Schema = Record<string, any>

export function isPlainObject(value: unknown): value is Record<string, any> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * adonis-autoswagger crashes on `null` inside JSON examples (it recurses into
 * every `typeof 'object'`), so nulls are swapped for this marker before it
 * parses an annotation and turned back into null afterwards.
 */
export const NULL_MARKER = '__openapi_null__'

/** Rewrites the JSON part of an annotation line with nulls replaced by NULL_MARKER. */
export function markJsonNulls(line: string): string {
  const start = line.search(/[[{]/)
  if (start === -1 || !line.includes('null')) return line
  // The JSON may be followed by " - description": try the longest parseable prefix.
  for (let end = line.length; end > start; end = line.lastIndexOf(' - ', end - 1)) {
    try {
      const value = JSON.parse(line.slice(start, end))
      const marked = JSON.stringify(value, (_key, item) => (item === null ? NULL_MARKER : item))
      return line.slice(0, start) + marked + line.slice(end)
    } catch {
      // not JSON up to here; try a shorter prefix
    }
  }
  return line
}

const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** A schema describing one example value (used for JSON examples in JSDoc). */
export function schemaFromValue(value: unknown): Schema {
  if (value === null || value === undefined || value === NULL_MARKER) return {}
  if (Array.isArray(value)) {
    return { type: 'array', items: value.length > 0 ? schemaFromValue(value[0]) : {} }
  }
  if (isPlainObject(value)) {
    const properties: Schema = {}
    for (const [key, item] of Object.entries(value)) properties[key] = schemaFromValue(item)
    return { type: 'object', properties }
  }
  if (typeof value === 'number') {
    return { type: Number.isInteger(value) ? 'integer' : 'number', example: value }
  }
  if (typeof value === 'boolean') return { type: 'boolean', example: value }
  const text = String(value)
  if (UUID.test(text)) return { type: 'string', format: 'uuid', example: text }
  if (ISO_DATE_TIME.test(text)) return { type: 'string', format: 'date-time', example: text }
  return { type: 'string', example: text }
}

/**
 * adonis-autoswagger turns a JSON example such as `{"success":true}` into
 * `{ type: 'object', properties: { success: true } }` (primitives left as
 * property "schemas") and arrays into objects keyed "0", "1"... This rebuilds
 * a valid schema from what it produced and the example it kept, while keeping
 * the `$ref`s it resolved from `<Model>` / `<validator>` placeholders.
 */
export function repairSchema(schema: unknown, example: unknown): Schema {
  if (!isPlainObject(schema)) return schemaFromValue(schema ?? example)
  if ('$ref' in schema || 'oneOf' in schema || 'anyOf' in schema || 'allOf' in schema) {
    return schema
  }

  if (Array.isArray(example)) {
    const itemSchema = schema.type === 'array' ? schema.items : schema.properties?.['0']
    if (isPlainObject(itemSchema) && ('$ref' in itemSchema || 'oneOf' in itemSchema)) {
      return { type: 'array', items: itemSchema }
    }
    return {
      type: 'array',
      items: example.length > 0 ? repairSchema(itemSchema ?? example[0], example[0]) : {},
    }
  }

  if (schema.type === 'object' && isPlainObject(schema.properties)) {
    const source = isPlainObject(example) ? example : {}
    const properties: Schema = {}
    for (const [key, value] of Object.entries(schema.properties)) {
      properties[key] = repairSchema(value, source[key])
    }
    return { ...schema, properties }
  }

  return schema
}

/** An example value for a JSON schema (validators carry no examples of their own). */
export function exampleFromSchema(schema: Schema, name = ''): unknown {
  if (!isPlainObject(schema)) return null
  if ('example' in schema) return schema.example
  if ('const' in schema) return schema.const
  if (Array.isArray(schema.enum) && schema.enum.length > 0) {
    return schema.enum.includes(true) ? true : schema.enum[0]
  }
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type
  switch (type) {
    case 'object': {
      const out: Record<string, unknown> = {}
      for (const [key, value] of Object.entries(schema.properties ?? {})) {
        out[key] = exampleFromSchema(value as Schema, key)
      }
      return out
    }
    case 'array':
      return [exampleFromSchema(schema.items ?? {}, name)]
    case 'integer':
    case 'number':
      return typeof schema.minimum === 'number' ? schema.minimum : 1
    case 'boolean':
      return true
    case 'string':
      return exampleString(schema, name)
    default:
      return null
  }
}

function exampleString(schema: Schema, name: string): string {
  switch (schema.format) {
    case 'email':
      return 'user@example.com'
    case 'uuid':
      return '5f0c6b8e-3a7c-4c1e-9f7a-2b1d3c4e5f60'
    case 'date-time':
      return '2026-01-01T00:00:00.000Z'
    case 'uri':
    case 'url':
      return 'https://example.com'
  }
  const base = name || 'string'
  const min = typeof schema.minLength === 'number' ? schema.minLength : 0
  return base.length >= min ? base : base.padEnd(min, 'x')
}

/** Puts back the nulls NULL_MARKER stood for (examples keep them). */
export function restoreNulls(node: unknown): unknown {
  if (node === NULL_MARKER) return null
  if (Array.isArray(node)) return node.map(restoreNulls)
  if (!isPlainObject(node)) return node
  return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, restoreNulls(value)]))
}

/** Calls `visit` on every object in a JSON tree (depth first). */
export function walkObjects(node: unknown, visit: (obj: Record<string, any>) => void): void {
  if (Array.isArray(node)) {
    for (const item of node) walkObjects(item, visit)
    return
  }
  if (!isPlainObject(node)) return
  visit(node)
  for (const value of Object.values(node)) walkObjects(value, visit)
}
