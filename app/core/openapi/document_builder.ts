import { existsSync, readFileSync } from 'node:fs'
import type { RouteJSON } from '@adonisjs/core/types/http'
import type { EngineOutput, RouteSource } from '#core/openapi/autoswagger_engine'
import { nullableFieldsOf, validatorUsedBy } from '#core/openapi/controller_source'
import { BEARER_SCHEME, credentialNeed, securityFor } from '#core/openapi/route_security'
import {
  isPlainObject,
  repairSchema,
  restoreNulls,
  walkObjects,
  type Schema,
} from '#core/openapi/schema_tools'

export const OPENAPI_VERSION = '3.1.0'
const SCHEMA_REF = '#/components/schemas/'
const ERROR_REF = `${SCHEMA_REF}ErrorEnvelope`
const BODY_METHODS = new Set(['post', 'put', 'patch'])
/** Keys VineJS's `validateUsing` adds next to the body; they are not body fields. */
const NON_BODY_KEYS = new Set(['params', 'headers', 'cookies'])

export interface BuildInput {
  /** Every route of the live router that belongs in the document. */
  routes: RouteJSON[]
  engine: EngineOutput
  info: Schema
  /** Every `code` the failure envelope can carry. */
  errorCodes: string[]
  /** Responses replacing the generated ones, by route name (for non-JSON answers). */
  responseOverrides: Record<string, Record<string, Schema>>
}

export interface BuildResult {
  document: Schema
  warnings: string[]
}

/** `/agents/:id/files/:path?` -> `/agents/{id}/files/{path}` (autoswagger's key form). */
export function openApiPath(pattern: string): string {
  const path = pattern
    .split('/')
    .map((part) => (part.startsWith(':') ? `{${part.slice(1).replace(/\?$/, '')}}` : part))
    .join('/')
    .replace(/\/$/, '')
  return path === '' ? '/' : path
}

function envelopeOf(data: Schema): Schema {
  return {
    type: 'object',
    required: ['success', 'data'],
    properties: { success: { type: 'boolean', const: true }, data },
  }
}

function isEnvelope(schema: Schema, example: unknown): boolean {
  return (
    (isPlainObject(schema.properties) && 'success' in schema.properties) ||
    (isPlainObject(example) && 'success' in example)
  )
}

function errorResponse(description: string): Schema {
  return { description, content: { 'application/json': { schema: { $ref: ERROR_REF } } } }
}

function defaultTag(path: string): string {
  const parts = path.split('/').filter((part) => part !== '' && !part.startsWith('{'))
  if (parts[0] === 'api' && parts[1]) return `${parts[0]}/${parts[1]}`
  return (parts[0] ?? 'root').replace(/\.json$/, '')
}

function cleanSummary(summary: unknown, action: string): string {
  const text = typeof summary === 'string' ? summary : ''
  const suffix = action ? ` (${action})` : 'route'
  return (text.endsWith(suffix) ? text.slice(0, -suffix.length) : text).trim()
}

/**
 * Turns adonis-autoswagger's output into the served document: one operation
 * for every method of every route of the live router (autoswagger drops PATCH
 * when a route also answers PUT, and gives up on routes it cannot read), valid
 * OpenAPI 3.1 schemas, the `{ success, data }` envelope around success bodies,
 * the shared failure envelope on errors, security from the route middleware.
 */
export class DocumentBuilder {
  #input: BuildInput
  #generated: Schema
  #schemas: Record<string, Schema>
  #operationIds = new Set<string>()
  #sourceTexts = new Map<string, string | null>()
  #warnings: string[] = []

  constructor(input: BuildInput) {
    this.#input = input
    this.#generated = input.engine.document
    this.#schemas = {
      ...(this.#generated.components?.schemas ?? {}),
      ErrorEnvelope: this.#errorEnvelopeSchema(),
    }
  }

  build(): BuildResult {
    const paths: Record<string, Record<string, Schema>> = {}
    for (const route of this.#input.routes) {
      const path = openApiPath(route.pattern)
      for (const method of route.methods.map((m) => m.toLowerCase())) {
        if (method === 'head') continue
        paths[path] = paths[path] ?? {}
        paths[path][method] = this.#operation(route, path, method)
      }
    }

    const document: Schema = {
      openapi: OPENAPI_VERSION,
      info: this.#input.info,
      tags: this.#tags(paths),
      paths,
      components: {
        schemas: this.#schemas,
        responses: {
          Error: errorResponse(
            'Any failure: `{ success: false, error, code }` with the status of the error class'
          ),
        },
        securitySchemes: {
          [BEARER_SCHEME]: {
            type: 'http',
            scheme: 'bearer',
            description:
              'API key (`hk_...`) for the programmatic API, or the JWT from POST /auth/login for the dashboard API',
          },
        },
      },
    }
    this.#replaceDanglingRefs(document)
    return { document: restoreNulls(document) as Schema, warnings: this.#warnings }
  }

  #errorEnvelopeSchema(): Schema {
    return {
      type: 'object',
      description: 'Failure envelope of every error answer',
      required: ['success', 'error', 'code'],
      properties: {
        success: { type: 'boolean', const: false },
        error: { type: 'string', description: 'Human-readable message' },
        code: { type: 'string', enum: [...new Set(this.#input.errorCodes)].sort() },
      },
      example: { success: false, error: 'Authentication required', code: 'AUTH_REQUIRED' },
    }
  }

  #generatedOperation(path: string, method: string): Schema {
    const forPath = this.#generated.paths?.[path] ?? {}
    // autoswagger keeps only PUT when a route answers PUT and PATCH.
    const op = forPath[method] ?? (method === 'patch' ? forPath.put : undefined)
    return isPlainObject(op) ? structuredClone(op) : {}
  }

  #operation(route: RouteJSON, path: string, method: string): Schema {
    const generated = this.#generatedOperation(path, method)
    const source = this.#input.engine.sources.get(route)
    const annotations = source?.annotations
    const need = credentialNeed(route)
    const validator = this.#validatorFor(source)

    const op: Schema = {
      summary:
        annotations?.summary ||
        cleanSummary(generated.summary, source?.action ?? '') ||
        `${method.toUpperCase()} ${path}`,
      ...(annotations?.description ? { description: annotations.description } : {}),
      operationId: this.#operationId(route, method, annotations?.operationId),
      tags: [annotations?.tag || defaultTag(path)],
      parameters: this.#parameters(route, generated.parameters, validator, method),
      security: securityFor(need),
    }

    const requestBody = this.#requestBody(generated.requestBody, validator, method)
    if (requestBody) op.requestBody = requestBody

    const documented = Object.keys(annotations?.responses ?? {}).length > 0
    op.responses = this.#responses(documented ? generated.responses : {})
    if (need !== 'none' && !op.responses['401']) {
      op.responses['401'] = errorResponse('Missing or invalid credential (AUTH_REQUIRED)')
    }
    if ((requestBody || validator) && !op.responses['400']) {
      op.responses['400'] = errorResponse('Invalid input (VALIDATION_ERROR)')
    }
    const override = route.name ? this.#input.responseOverrides[route.name] : undefined
    if (override) op.responses = { ...structuredClone(override) }
    this.#markNullable(op.responses, source)
    op.responses.default = { $ref: '#/components/responses/Error' }
    return op
  }

  #operationId(route: RouteJSON, method: string, annotated?: string): string {
    const multi = route.methods.filter((m) => m !== 'HEAD').length > 1
    const base =
      annotated ||
      (route.name ? route.name + (multi ? `.${method}` : '') : '') ||
      `${method}${route.pattern.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`
    let id = base
    for (let n = 2; this.#operationIds.has(id); n++) id = `${base}_${n}`
    this.#operationIds.add(id)
    return id
  }

  #sourceText(file: string): string | null {
    if (!this.#sourceTexts.has(file)) {
      this.#sourceTexts.set(file, existsSync(file) ? readFileSync(file, 'utf8') : null)
    }
    return this.#sourceTexts.get(file) ?? null
  }

  /** Widens the `@nullable` fields of the success responses to `[type, 'null']`. */
  #markNullable(responses: Record<string, Schema>, source: RouteSource | undefined) {
    if (!source?.sourceFile || !source.action) return
    const text = this.#sourceText(source.sourceFile)
    const fields = new Set(text ? nullableFieldsOf(text, source.action) : [])
    if (fields.size === 0) return
    for (const [status, response] of Object.entries(responses)) {
      if (!status.startsWith('2')) continue
      walkObjects(response?.content?.['application/json']?.schema, (node) => {
        for (const [name, property] of Object.entries(node.properties ?? {}) as [
          string,
          Schema,
        ][]) {
          if (!fields.has(name) || !property.type || Array.isArray(property.type)) continue
          property.type = [property.type, 'null']
        }
      })
    }
  }

  /** The validator the handler passes to `validateUsing`: the truth of what input is accepted. */
  #validatorFor(source: RouteSource | undefined) {
    if (!source?.sourceFile || !source.action) return null
    const text = this.#sourceText(source.sourceFile)
    const name = text ? validatorUsedBy(text, source.action) : null
    const schema = name ? this.#input.engine.validators.get(name) : undefined
    return name && schema ? { name, schema } : null
  }

  #parameters(
    route: RouteJSON,
    generated: unknown,
    validator: { schema: Schema } | null,
    method: string
  ): Schema[] {
    const params = new Map<string, Schema>()
    for (const part of route.pattern.split('/')) {
      if (!part.startsWith(':')) continue
      const name = part.slice(1).replace(/\?$/, '')
      params.set(`path:${name}`, { in: 'path', name, required: true, schema: { type: 'string' } })
    }
    for (const param of Array.isArray(generated) ? generated : []) {
      if (!isPlainObject(param) || typeof param.name !== 'string') continue
      const key = `${param.in}:${param.name}`
      if (param.in === 'path' && !params.has(key)) continue
      const schema: Schema = isPlainObject(param.schema) ? { ...param.schema } : { type: 'string' }
      if (schema.example === null || schema.example === '') delete schema.example
      const merged: Schema = { ...params.get(key), ...param, schema }
      if (!merged.description) delete merged.description
      if (param.in === 'path') merged.required = true
      params.set(key, merged)
    }
    if (validator && !BODY_METHODS.has(method)) {
      const required: string[] = validator.schema.required ?? []
      for (const [name, schema] of Object.entries(validator.schema.properties ?? {})) {
        if (NON_BODY_KEYS.has(name)) continue
        // The validator's rules win; an @paramQuery line still lends its description.
        params.set(`query:${name}`, {
          ...params.get(`query:${name}`),
          in: 'query',
          name,
          required: required.includes(name),
          schema,
        })
      }
    }
    return [...params.values()]
  }

  #requestBody(
    generated: unknown,
    validator: { name: string; schema: Schema } | null,
    method: string
  ): Schema | undefined {
    if (!BODY_METHODS.has(method)) return undefined
    const annotated = isPlainObject(generated) && isPlainObject(generated.content)
    // The validator's rules win over a JSON example, except for form uploads.
    if (validator && !(annotated && generated.content['multipart/form-data'])) {
      const example = annotated ? generated.content['application/json']?.example : undefined
      const props = validator.schema.properties ?? {}
      const hasNonBody = Object.keys(props).some((key) => NON_BODY_KEYS.has(key))
      let schema: Schema = { $ref: `${SCHEMA_REF}${validator.name}` }
      if (hasNonBody) {
        const rest: Schema = { ...validator.schema }
        delete rest.example
        schema = {
          ...rest,
          properties: Object.fromEntries(
            Object.entries(props).filter(([key]) => !NON_BODY_KEYS.has(key))
          ),
          required: (rest.required ?? []).filter((key: string) => !NON_BODY_KEYS.has(key)),
        }
      }
      const media: Schema = { schema, ...(example !== undefined ? { example } : {}) }
      return { required: true, content: { 'application/json': media } }
    }
    if (!annotated) return undefined
    const content: Schema = {}
    for (const [type, media] of Object.entries(generated.content)) {
      if (!isPlainObject(media) || (media.schema === undefined && media.example === undefined)) {
        continue
      }
      content[type] = { ...media, schema: repairSchema(media.schema, media.example) }
    }
    return Object.keys(content).length > 0 ? { content } : undefined
  }

  #responses(generated: unknown): Record<string, Schema> {
    const responses: Record<string, Schema> = {}
    for (const [status, response] of Object.entries(isPlainObject(generated) ? generated : {})) {
      if (!/^[1-5]\d\d$/.test(status) || !isPlainObject(response)) continue
      responses[status] = this.#response(Number(status), response)
    }
    if (!Object.keys(responses).some((status) => status.startsWith('2'))) {
      responses['200'] = {
        description: 'Success',
        content: { 'application/json': { schema: envelopeOf({}) } },
      }
    }
    return responses
  }

  #response(status: number, response: Schema): Schema {
    const description =
      typeof response.description === 'string' && response.description
        ? response.description
        : `HTTP ${status}`
    const out: Schema = { description }
    if (isPlainObject(response.headers) && Object.keys(response.headers).length > 0) {
      out.headers = response.headers
    }
    if (status >= 400) {
      // Every error answer is JSON in the failure envelope, whatever the annotation says.
      const json = response.content?.['application/json']
      out.content = {
        'application/json': {
          schema: { $ref: ERROR_REF },
          ...(isPlainObject(json) && json.example !== undefined ? { example: json.example } : {}),
        },
      }
      return out
    }
    const content: Schema = {}
    for (const [type, media] of Object.entries(
      isPlainObject(response.content) ? response.content : {}
    )) {
      if (!isPlainObject(media)) continue
      if (type !== 'application/json') {
        content[type] = media
        continue
      }
      const hasShape = media.schema !== undefined || media.example !== undefined
      let schema = hasShape ? repairSchema(media.schema, media.example) : {}
      let example = media.example
      if (!isEnvelope(schema, example)) {
        schema = envelopeOf(schema)
        if (example !== undefined) example = { success: true, data: example }
      }
      content[type] = { schema, ...(example !== undefined ? { example } : {}) }
    }
    if (Object.keys(content).length > 0) out.content = content
    return out
  }

  #tags(paths: Record<string, Record<string, Schema>>): Schema[] {
    const names = new Set<string>()
    for (const operations of Object.values(paths)) {
      for (const op of Object.values(operations)) for (const tag of op.tags ?? []) names.add(tag)
    }
    return [...names].sort().map((name) => ({ name }))
  }

  /** A `<Name>` in an annotation that matches no model or validator must not break the document. */
  #replaceDanglingRefs(document: Schema) {
    walkObjects(document, (node) => {
      if (typeof node.$ref !== 'string' || !node.$ref.startsWith(SCHEMA_REF)) return
      const name = node.$ref.slice(SCHEMA_REF.length)
      if (name in this.#schemas) return
      delete node.$ref
      node.description = `Unknown schema "${name}" (no model or validator of that name)`
      this.#warnings.push(`OpenAPI: annotation refers to unknown schema "${name}"`)
    })
  }
}
