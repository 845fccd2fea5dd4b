import vine from '@vinejs/vine'
import {
  ANY_CONTROL,
  CONTROL_BUT_WHITESPACE,
  IDENTIFIER_FIELDS,
} from '#core/http/input_gate_middleware'
import { t, type JsonSchema } from '#core/openapi/shapes'

/** A VineJS validator (what `request.validateUsing` takes): it describes itself as JSON Schema. */
export interface InputValidator {
  toJSONSchema(): JsonSchema
}

/** Where an input travels: the gate is stricter on params, query values and identifiers. */
export type InputLocation = 'body' | 'query' | 'path'

/** Keys VineJS's `validateUsing` reads besides the body or query; they are not input fields. */
const NON_INPUT_KEYS = new Set(['params', 'headers', 'cookies'])

const TRIM_MARK = 'x-trimmed'

/**
 * VineJS's `trim()` says nothing in toJSONSchema, yet the length rules after
 * it measure the trimmed text: the rule is taught to leave a mark, which
 * `gateString` turns into a pattern on the trimmed length. (The rule object
 * is VineJS's own, shared by every `.trim()`; only its JSON Schema changes.)
 */
const trimRule = (vine.string().trim() as unknown as { validations: { rule: object }[] })
  .validations[0].rule as { toJSONSchema?: (schema: JsonSchema) => void }
trimRule.toJSONSchema = (schema) => {
  schema[TRIM_MARK] = true
}

/** The body of a regex character class (`[...]`) as its source says it. */
function classBody(pattern: RegExp): string {
  return pattern.source.slice(1, -1)
}

/** Text without the characters the gate refuses (strict: no tab or line break either). */
function gatePattern(strict: boolean): string {
  return `^[^${classBody(strict ? ANY_CONTROL : CONTROL_BUT_WHITESPACE)}]*$`
}

/**
 * Any JSON value the input gate lets through: what a field VineJS does not
 * know may hold (it is dropped, not refused), and what free-form objects hold.
 */
const gatedJson = t.named('GatedJsonValue', {
  schema: {
    description: 'Any JSON value without control characters in its strings and keys',
    anyOf: [
      { type: 'string', pattern: gatePattern(false) },
      { type: ['number', 'boolean', 'null'] },
      { type: 'array', items: { $ref: '#/components/schemas/GatedJsonValue' } },
      {
        type: 'object',
        propertyNames: { pattern: gatePattern(true) },
        additionalProperties: { $ref: '#/components/schemas/GatedJsonValue' },
      },
    ],
  },
})

function repeat(atom: string, min: number, max: number | undefined): string {
  if (max === undefined) return min === 0 ? `${atom}*` : `${atom}{${min},}`
  return `${atom}{${min},${max}}`
}

/**
 * The input gate (#core/http/input_gate_middleware) refuses control
 * characters in every string: a pattern says so. For a trimmed string the
 * lengths apply to the text between the surrounding whitespace, which the
 * same pattern states (minLength/maxLength would be wrong for the raw text).
 */
function gateString(schema: JsonSchema, strict: boolean): JsonSchema {
  const trimmed = schema[TRIM_MARK] === true
  delete schema[TRIM_MARK]
  if (schema.enum || schema.const !== undefined || schema.format) return schema
  const forbidden = classBody(strict ? ANY_CONTROL : CONTROL_BUT_WHITESPACE)
  const any = `[^${forbidden}]`
  let pattern = gatePattern(strict)
  if (trimmed) {
    const space = `[^\\S${forbidden}]`
    const solid = `[^\\s${forbidden}]`
    const min: number = schema.minLength ?? 0
    const max: number | undefined = schema.maxLength
    delete schema.minLength
    delete schema.maxLength
    let core: string
    if (max === 0) core = ''
    else if (max === 1) core = min >= 1 ? solid : `${solid}?`
    else {
      const inner = repeat(any, Math.max(0, min - 2), max === undefined ? undefined : max - 2)
      const long = `${solid}${inner}${solid}`
      core = min >= 2 ? long : `${solid}(?:${inner}${solid})?`
      if (min === 0) core = `(?:${core})?`
    }
    pattern = `^${space}*${core}${space}*$`
  }
  if (schema.pattern) {
    const { pattern: own, ...rest } = schema
    return { ...rest, allOf: [...(schema.allOf ?? []), { pattern: own }, { pattern }] }
  }
  return { ...schema, pattern }
}

/** A schema that also allows null. */
function orNull(schema: JsonSchema): JsonSchema {
  if (typeof schema.type === 'string') return { ...schema, type: [schema.type, 'null'] }
  if (Array.isArray(schema.type)) {
    return schema.type.includes('null') ? schema : { ...schema, type: [...schema.type, 'null'] }
  }
  if (Array.isArray(schema.enum)) {
    return schema.enum.includes(null) ? schema : { ...schema, enum: [...schema.enum, null] }
  }
  return { anyOf: [schema, { type: 'null' }] }
}

/**
 * Rewrites a VineJS JSON Schema into what the route really accepts:
 * - objects do not refuse unknown properties (VineJS drops them): any
 *   gated JSON may stand there, under keys the gate lets through;
 * - an optional field may also be null (VineJS reads null as absent);
 * - strings carry the gate's pattern (and trimmed lengths, see gateString).
 */
function describeAccepted(
  node: JsonSchema,
  location: InputLocation,
  key: string,
  vineOptional = true
): JsonSchema {
  if (typeof node !== 'object' || node === null) return node
  const out: JsonSchema = { ...node }
  for (const combiner of ['anyOf', 'oneOf', 'allOf'] as const) {
    if (Array.isArray(out[combiner])) {
      out[combiner] = out[combiner].map((item: JsonSchema) =>
        describeAccepted(item, location, key, vineOptional)
      )
    }
  }
  const types: string[] = Array.isArray(out.type) ? out.type : out.type ? [out.type] : []
  if (out.properties) {
    const required = new Set<string>(out.required ?? [])
    out.properties = Object.fromEntries(
      Object.entries<JsonSchema>(out.properties).map(([name, value]) => {
        const described = describeAccepted(value, location, name, vineOptional)
        // A query string has no null to send.
        const nullable = vineOptional && location === 'body' && !required.has(name)
        return [name, nullable ? orNull(described) : described]
      })
    )
  }
  if (types.includes('object')) {
    if (typeof out.additionalProperties === 'object') {
      out.additionalProperties = describeAccepted(
        out.additionalProperties,
        location,
        key,
        vineOptional
      )
    } else {
      out.additionalProperties = gatedJson.schema
    }
    out.propertyNames = { pattern: gatePattern(true) }
    if (Array.isArray(out.required) && out.required.length === 0) delete out.required
  }
  if (types.includes('array') && out.items) {
    out.items = describeAccepted(out.items, location, key, vineOptional)
  }
  if (types.includes('string')) {
    return gateString(out, location !== 'body' || IDENTIFIER_FIELDS.has(key))
  }
  return out
}

/** The JSON Schema of what a validator accepts in one place (body or query). */
export function inputSchema(validator: InputValidator, location: InputLocation): JsonSchema {
  const schema = validator.toJSONSchema()
  delete schema.$schema
  if (schema.properties) {
    for (const key of NON_INPUT_KEYS) delete schema.properties[key]
    if (Array.isArray(schema.required)) {
      schema.required = schema.required.filter((key: string) => !NON_INPUT_KEYS.has(key))
    }
  }
  return describeAccepted(schema, location, '')
}

/**
 * A schema written by hand (a path parameter, a body no validator checks),
 * as the input gate lets it through: the gate's patterns, unknown keys.
 */
export function gatedSchema(schema: JsonSchema, location: InputLocation): JsonSchema {
  return describeAccepted(schema, location, '', false)
}
