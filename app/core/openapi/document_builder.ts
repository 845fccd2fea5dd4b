import type { RouteJSON } from '@adonisjs/core/types/http'
import {
  NotFoundException,
  PayloadTooLargeException,
  ValidationException,
  AuthRequiredException,
} from '#core/exceptions/api_exceptions'
import type {
  ApiExceptionClass,
  MultipartBody,
  RouteContract,
  SuccessResponse,
} from '#core/openapi/contracts'
import { gatedSchema, inputSchema, type InputValidator } from '#core/openapi/request_schema'
import { BEARER_SCHEME, credentialNeed, securityFor } from '#core/openapi/route_security'
import { envelopeSchema, namedSchemas, type JsonSchema, type Shape } from '#core/openapi/shapes'

export const OPENAPI_VERSION = '3.1.0'
const SCHEMA_REF = '#/components/schemas/'
const ERROR_REF = `${SCHEMA_REF}ErrorEnvelope`
const BODY_METHODS = new Set(['post', 'put', 'patch'])

export interface BuildInput {
  /** Every route of the live router that belongs in the document. */
  routes: RouteJSON[]
  /** The contract of a route, by route name. */
  contractOf: (routeName: string | undefined) => RouteContract | undefined
  info: JsonSchema
  /** Every `code` the failure envelope can carry. */
  errorCodes: string[]
}

export interface BuildResult {
  document: JsonSchema
  /** Routes without a contract (described from the router alone). */
  warnings: string[]
}

/** `/agents/:id/files/:path?` -> `/agents/{id}/files/{path}`. */
export function openApiPath(pattern: string): string {
  const path = pattern
    .split('/')
    .map((part) => (part.startsWith(':') ? `{${part.slice(1).replace(/\?$/, '')}}` : part))
    .join('/')
    .replace(/\/$/, '')
  return path === '' ? '/' : path
}

function defaultTag(path: string): string {
  const parts = path.split('/').filter((part) => part !== '' && !part.startsWith('{'))
  if (parts[0] === 'api' && parts[1]) return `${parts[0]}/${parts[1]}`
  return (parts[0] ?? 'root').replace(/\.json$/, '')
}

function isValidator(body: InputValidator | Shape): body is InputValidator {
  return typeof (body as InputValidator).toJSONSchema === 'function'
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Invalid input',
  401: 'Missing or invalid credential',
  402: 'Not enough AI Credits',
  403: 'Not allowed',
  404: 'No such resource',
  409: 'The agent is not running',
  410: 'Retired',
  413: 'Body too large',
  422: 'Content blocked',
  429: 'Rate limit reached',
  503: 'A dependency is unavailable',
}

/** The validator's schema with a contract's extra rules: `properties` field by field, the rest as given. */
function withBodyRules(schema: JsonSchema, rules: JsonSchema): JsonSchema {
  const { properties, ...rest } = rules
  const merged: JsonSchema = { ...schema, ...rest }
  if (properties) {
    merged.properties = { ...schema.properties }
    for (const [name, rule] of Object.entries<JsonSchema>(properties)) {
      const field: JsonSchema = { ...schema.properties?.[name], ...rule }
      // Both say a pattern: the value must match both.
      const before = schema.properties?.[name]?.pattern
      if (before && rule.pattern && before !== rule.pattern) {
        field.allOf = [...(field.allOf ?? []), { pattern: before }, { pattern: rule.pattern }]
        delete field.pattern
      }
      merged.properties[name] = field
    }
  }
  return merged
}

/** Whether a body schema needs at least one field (itself, or in every branch of a oneOf/anyOf). */
function requiresFields(schema: JsonSchema): boolean {
  if (Array.isArray(schema.required) && schema.required.length > 0) return true
  const branches: JsonSchema[] | undefined = schema.oneOf ?? schema.anyOf
  return Array.isArray(branches) && branches.length > 0 && branches.every(requiresFields)
}

/** A multipart/form-data request body: each file a binary part (OpenAPI 3.1 and 3.0 both read `format: binary`). */
function multipartBody(body: MultipartBody): JsonSchema {
  const properties: Record<string, JsonSchema> = {}
  const required: string[] = []
  for (const [name, file] of Object.entries(body.files)) {
    properties[name] = {
      type: 'string',
      format: 'binary',
      ...(file.mediaType ? { contentMediaType: file.mediaType } : {}),
      description: file.description,
    }
    if (file.required !== false) required.push(name)
  }
  return {
    required: required.length > 0,
    content: {
      'multipart/form-data': {
        schema: { type: 'object', properties, ...(required.length ? { required } : {}) },
      },
    },
  }
}

/** Status and envelope code of an exception class. */
function failureOf(exception: ApiExceptionClass): { status: number; code: string } {
  return { status: exception.status, code: new exception().apiCode }
}

/**
 * The served document, from the live router and each route's contract
 * (contracts.ts): one operation for every method of every route; request
 * schemas from the route's VineJS validators (request_schema.ts); success
 * answers in the `{ success, data }` envelope from the contract's shapes;
 * failures in the failure envelope with the codes each status can carry;
 * security from the route middleware.
 */
export class DocumentBuilder {
  #input: BuildInput
  #operationIds = new Set<string>()
  #warnings: string[] = []

  constructor(input: BuildInput) {
    this.#input = input
  }

  async build(): Promise<BuildResult> {
    const paths: Record<string, Record<string, JsonSchema>> = {}
    for (const route of this.#input.routes) {
      const path = openApiPath(route.pattern)
      for (const method of route.methods.map((m) => m.toLowerCase())) {
        if (method === 'head') continue
        paths[path] = paths[path] ?? {}
        paths[path][method] = await this.#operation(route, path, method)
      }
    }

    const document: JsonSchema = {
      openapi: OPENAPI_VERSION,
      info: this.#input.info,
      tags: this.#tags(paths),
      paths,
      components: {
        schemas: { ...this.#namedSchemasUsed(paths), ErrorEnvelope: this.#errorEnvelopeSchema() },
        responses: {
          Error: {
            description:
              'Any failure: `{ success: false, error, code }` with the status of the error class',
            content: { 'application/json': { schema: { $ref: ERROR_REF } } },
          },
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
    return { document, warnings: this.#warnings }
  }

  #errorEnvelopeSchema(): JsonSchema {
    return {
      type: 'object',
      description: 'Failure envelope of every error answer',
      required: ['success', 'error', 'code'],
      properties: {
        success: { const: false },
        error: { type: 'string', description: 'Human-readable message' },
        code: { type: 'string', enum: [...new Set(this.#input.errorCodes)].sort() },
      },
      example: { success: false, error: 'Authentication required', code: 'AUTH_REQUIRED' },
    }
  }

  async #operation(route: RouteJSON, path: string, method: string): Promise<JsonSchema> {
    const contract = this.#input.contractOf(route.name)
    if (!contract) {
      this.#warnings.push(`OpenAPI: no contract for route ${route.name ?? route.pattern}`)
    }
    const need = credentialNeed(route)
    const parameters = this.#parameters(route, contract)
    const requestBody = BODY_METHODS.has(method) ? await this.#requestBody(contract) : undefined

    const op: JsonSchema = {
      summary: contract?.summary ?? `${method.toUpperCase()} ${path}`,
      ...(contract?.description ? { description: contract.description } : {}),
      operationId: this.#operationId(route, method),
      tags: [contract?.tag ?? defaultTag(path)],
      parameters,
      ...(requestBody ? { requestBody } : {}),
      security: securityFor(need),
      ...(contract?.deprecated ? { deprecated: true } : {}),
    }

    const failures: ApiExceptionClass[] = [...(contract?.errors ?? [])]
    if (need !== 'none') failures.push(AuthRequiredException)
    if (parameters.length > 0 || requestBody) failures.push(ValidationException)
    if (requestBody) failures.push(PayloadTooLargeException)
    if (parameters.some((parameter) => parameter.in === 'path')) failures.push(NotFoundException)

    op.responses = {
      ...this.#successResponses(contract),
      ...this.#failureResponses(failures),
      default: { $ref: '#/components/responses/Error' },
    }
    if (!contract) op.responses['200'] = { description: 'Success' }
    return op
  }

  #operationId(route: RouteJSON, method: string): string {
    const multi = route.methods.filter((m) => m !== 'HEAD').length > 1
    const base =
      (route.name ? route.name + (multi ? `.${method}` : '') : '') ||
      `${method}${route.pattern.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`
    let id = base
    for (let n = 2; this.#operationIds.has(id); n++) id = `${base}_${n}`
    this.#operationIds.add(id)
    return id
  }

  /** Path parameters (with the route's matcher, if any) and the query validator's fields. */
  #parameters(route: RouteJSON, contract: RouteContract | undefined): JsonSchema[] {
    const descriptions = contract?.parameters ?? {}
    const parameters: JsonSchema[] = []
    for (const part of route.pattern.split('/')) {
      if (!part.startsWith(':')) continue
      const name = part.slice(1).replace(/\?$/, '')
      const matcher = route.matchers?.[name]?.match
      const schema = matcher
        ? { type: 'string', pattern: matcher.source }
        : gatedSchema({ type: 'string' }, 'path')
      parameters.push({
        in: 'path',
        name,
        required: true,
        schema,
        ...(descriptions[name] ? { description: descriptions[name] } : {}),
      })
    }
    if (contract?.query) {
      const schema = inputSchema(contract.query, 'query')
      const required: string[] = schema.required ?? []
      for (const [name, property] of Object.entries<JsonSchema>(schema.properties ?? {})) {
        parameters.push({
          in: 'query',
          name,
          required: required.includes(name),
          schema: property,
          ...(descriptions[name] ? { description: descriptions[name] } : {}),
        })
      }
    }
    return parameters
  }

  async #requestBody(contract: RouteContract | undefined): Promise<JsonSchema | undefined> {
    if (contract?.multipart) return multipartBody(contract.multipart)
    if (!contract?.body) return undefined
    const schema = isValidator(contract.body)
      ? inputSchema(contract.body, 'body')
      : gatedSchema(contract.body.schema, 'body')
    const rules =
      typeof contract.bodyRules === 'function' ? await contract.bodyRules() : contract.bodyRules
    const withRules = rules ? withBodyRules(schema, rules) : schema
    return {
      // A body whose fields are all optional may be left out.
      required: requiresFields(withRules),
      content: { 'application/json': { schema: withRules } },
    }
  }

  #successResponses(contract: RouteContract | undefined): Record<string, JsonSchema> {
    const responses: Record<string, JsonSchema> = {}
    for (const [status, answer] of Object.entries(contract?.responses ?? {}) as [
      string,
      SuccessResponse,
    ][]) {
      if ('content' in answer) {
        responses[status] = {
          description: answer.description,
          ...(answer.headers ? { headers: answer.headers } : {}),
          content: Object.fromEntries(
            Object.entries(answer.content).map(([type, schema]) => [type, { schema }])
          ),
        }
        continue
      }
      const [description, data] =
        'data' in answer ? [answer.description, answer.data] : ['Success', answer]
      responses[status] = {
        description,
        content: { 'application/json': { schema: envelopeSchema(data) } },
      }
    }
    return responses
  }

  /** One response per failure status, naming the envelope codes it can carry. */
  #failureResponses(failures: ApiExceptionClass[]): Record<string, JsonSchema> {
    const codesByStatus = new Map<number, Set<string>>()
    for (const exception of failures) {
      const { status, code } = failureOf(exception)
      codesByStatus.set(status, (codesByStatus.get(status) ?? new Set()).add(code))
    }
    const responses: Record<string, JsonSchema> = {}
    for (const [status, codes] of [...codesByStatus].sort(([a], [b]) => a - b)) {
      const list = [...codes].sort()
      responses[String(status)] = {
        description: `${STATUS_TEXT[status] ?? `HTTP ${status}`} (${list.join(', ')})`,
        content: {
          'application/json': {
            schema: { allOf: [{ $ref: ERROR_REF }], properties: { code: { enum: list } } },
          },
        },
      }
    }
    return responses
  }

  #tags(paths: Record<string, Record<string, JsonSchema>>): JsonSchema[] {
    const names = new Set<string>()
    for (const operations of Object.values(paths)) {
      for (const op of Object.values(operations)) for (const tag of op.tags ?? []) names.add(tag)
    }
    return [...names].sort().map((name) => ({ name }))
  }

  /** The named shapes the operations refer to, and those they refer to in turn. */
  #namedSchemasUsed(paths: JsonSchema): Record<string, JsonSchema> {
    const used: Record<string, JsonSchema> = {}
    const visit = (node: unknown) => {
      if (Array.isArray(node)) return node.forEach(visit)
      if (typeof node !== 'object' || node === null) return
      const ref = (node as JsonSchema).$ref
      if (typeof ref === 'string' && ref.startsWith(SCHEMA_REF)) {
        const name = ref.slice(SCHEMA_REF.length)
        const schema = namedSchemas.get(name)
        if (schema && !(name in used)) {
          used[name] = schema
          visit(schema)
        }
      }
      Object.values(node).forEach(visit)
    }
    visit(paths)
    return Object.fromEntries(Object.entries(used).sort(([a], [b]) => a.localeCompare(b)))
  }
}
