/**
 * Typed JSON shapes: each builder returns the JSON Schema (OpenAPI 3.1) of a
 * value together with its TypeScript type (`Infer<typeof shape>`), so an
 * answer's shape is written once, in code, next to the area's presenters,
 * and the document is made from it (see contracts.ts).
 */
export type JsonSchema = Record<string, any>

/** A JSON schema and, at type level only, the type of the values it describes. */
export interface Shape<T = unknown> {
  readonly schema: JsonSchema
  /** Never set: carries `T` for `Infer`. */
  readonly __type?: T
}

/** An object field that may be absent (`required` leaves it out). */
export interface OptionalShape<T = unknown> extends Shape<T | undefined> {
  readonly optional: true
}

export type Infer<S> = S extends Shape<infer T> ? T : never

/** What an async service function answers: `describes<Answer<typeof fn>>()(shape)`. */
export type Answer<F extends (...args: any[]) => unknown> = Awaited<ReturnType<F>>

type Fields = Record<string, Shape<any>>
type OptionalKeys<F extends Fields> = {
  [K in keyof F]: F[K] extends OptionalShape<any> ? K : never
}[keyof F]
type ObjectOf<F extends Fields> = {
  [K in Exclude<keyof F, OptionalKeys<F>>]: Infer<F[K]>
} & { [K in OptionalKeys<F>]?: Infer<F[K]> }

/**
 * Schemas published once in components.schemas, by name (filled as areas
 * declare named shapes; the document keeps those it refers to).
 */
export const namedSchemas = new Map<string, JsonSchema>()

function shape<T>(schema: JsonSchema): Shape<T> {
  return { schema }
}

function withNull(schema: JsonSchema): JsonSchema {
  if (typeof schema.type === 'string') return { ...schema, type: [schema.type, 'null'] }
  if (Array.isArray(schema.type)) return { ...schema, type: [...new Set([...schema.type, 'null'])] }
  return { anyOf: [schema, { type: 'null' }] }
}

export const t = {
  string: (extra: JsonSchema = {}) => shape<string>({ type: 'string', ...extra }),
  uuid: () => t.string({ format: 'uuid' }),
  /** ISO 8601 timestamps, as Luxon DateTimes and Dates serialize. */
  dateTime: () => t.string({ format: 'date-time' }),
  integer: (extra: JsonSchema = {}) => shape<number>({ type: 'integer', ...extra }),
  number: (extra: JsonSchema = {}) => shape<number>({ type: 'number', ...extra }),
  boolean: () => shape<boolean>({ type: 'boolean' }),
  literal: <const V extends string | number | boolean>(value: V) => shape<V>({ const: value }),
  enum: <const V extends readonly string[]>(values: V) =>
    shape<V[number]>({ type: 'string', enum: [...values] }),
  array: <T>(items: Shape<T>, extra: JsonSchema = {}) =>
    shape<T[]>({ type: 'array', items: items.schema, ...extra }),
  /** An object with these fields; others may appear (answers grow without breaking clients). */
  object: <F extends Fields>(fields: F, extra: JsonSchema = {}) => {
    const required = Object.keys(fields).filter((key) => !('optional' in fields[key]))
    const properties = Object.fromEntries(
      Object.entries(fields).map(([key, field]) => [key, field.schema])
    )
    return shape<ObjectOf<F>>({
      type: 'object',
      properties,
      ...(required.length > 0 ? { required } : {}),
      ...extra,
    })
  },
  /** An object keyed by any string, each value of one shape. */
  record: <T>(values: Shape<T>) =>
    shape<Record<string, T>>({ type: 'object', additionalProperties: values.schema }),
  /** Any JSON object (contents decided elsewhere, e.g. by a framework plugin). */
  anyObject: (extra: JsonSchema = {}) =>
    shape<Record<string, unknown>>({ type: 'object', ...extra }),
  /** Any JSON value. */
  unknown: () => shape<unknown>({}),
  nullable: <T>(inner: Shape<T>) => shape<T | null>(withNull(inner.schema)),
  optional: <T>(inner: Shape<T>): OptionalShape<T> => ({ schema: inner.schema, optional: true }),
  /** A value of any of these shapes (one may be a subset of another). */
  anyOf: <S extends Shape<any>[]>(...shapes: S) =>
    shape<Infer<S[number]>>({ anyOf: shapes.map((s) => s.schema) }),
  /** A shape published once under `name` in components.schemas and referred to by `$ref`. */
  named: <T>(name: string, inner: Shape<T>): Shape<T> => {
    if (namedSchemas.has(name)) throw new Error(`OpenAPI: two shapes are named "${name}"`)
    namedSchemas.set(name, { title: name, ...inner.schema })
    return shape<T>({ $ref: `#/components/schemas/${name}` })
  },
}

/**
 * One server-sent event as schemathesis and OpenAPI 3.1 read a
 * `text/event-stream` schema: each event, not the stream as a whole.
 */
export function sseEventSchema(data: string): JsonSchema {
  return {
    type: 'object',
    required: ['data'],
    properties: {
      event: { type: 'string' },
      data: { type: 'string', description: data },
      id: { type: 'string' },
      retry: { type: 'integer' },
    },
  }
}

/** The success envelope `{ success: true, data }` around a shape. */
export function envelopeSchema(data: Shape): JsonSchema {
  return {
    type: 'object',
    required: ['success', 'data'],
    properties: { success: { const: true }, data: data.schema },
  }
}

/**
 * Compile-time check that a presenter's type fits the shape documented for
 * it: `describes<PaymentView>()(t.object({...}))` fails to compile when a
 * field's type or presence disagrees.
 */
export function describes<T>() {
  return <S extends Shape<any>>(
    described: S & ([T] extends [Infer<S>] ? unknown : { mismatch: [T, Infer<S>] })
  ): S => described
}
