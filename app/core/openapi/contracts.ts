import type { ApiException } from '#core/exceptions/api_exceptions'
import type { InputValidator } from '#core/openapi/request_schema'
import type { JsonSchema, Shape } from '#core/openapi/shapes'

/** An exception class of #core/exceptions/api_exceptions (its status and envelope code). */
export type ApiExceptionClass = (new () => ApiException) & { status: number }

/** An answer that is not the JSON envelope: a stream, a file, a page. */
export interface MediaResponse {
  description: string
  /** Media type -> schema of the body. */
  content: Record<string, JsonSchema>
  headers?: Record<string, JsonSchema>
}

/** A success answer: the shape of `data` in `{ success: true, data }`, or a non-JSON answer. */
export type SuccessResponse = Shape | { description: string; data: Shape } | MediaResponse

/** One file part of a multipart/form-data body. */
export interface FilePart {
  description: string
  /** The media type of what the file holds (e.g. `application/gzip`). */
  mediaType?: string
  /** The route refuses a request without it (400). Default true. */
  required?: boolean
}

/** A multipart/form-data body (an upload), by field name. */
export interface MultipartBody {
  files: Record<string, FilePart>
}

/**
 * What one route takes and answers, the source of its part of /openapi.json.
 * Areas declare one per route name (app/<area>/api_contracts.ts) and
 * start/openapi.ts registers them; a route without one fails the OpenAPI test.
 */
export interface RouteContract {
  summary: string
  description?: string
  /** Group in the explorer (default: the first path segment). */
  tag?: string
  /** JSON body: the validator the handler runs on it, or a shape where no validator does. */
  body?: InputValidator | Shape
  /** A multipart/form-data body instead (an upload the handler streams). */
  multipart?: MultipartBody
  /**
   * Rules on the body the validator does not state (checked in code): JSON
   * Schema keywords added to the validator's schema (`properties` are merged
   * field by field), e.g. `oneOf`; a function when they depend on what is
   * installed (called when the document is built).
   */
  bodyRules?: JsonSchema | (() => JsonSchema | Promise<JsonSchema>)
  /** The validator the handler runs on the query string. */
  query?: InputValidator
  /** Descriptions of path and query parameters, by name. */
  parameters?: Record<string, string>
  /** Success answers by status; none for a retired route. */
  responses: Partial<Record<200 | 201 | 202 | 204, SuccessResponse>>
  /**
   * Failures this route answers beyond those every route of its kind has
   * (401 with a credential, 400 with input, 404 with path parameters).
   */
  errors?: ApiExceptionClass[]
  /** A retired route: kept so old clients learn why (410), not to be used. */
  deprecated?: boolean
}

export type RouteContracts = Record<string, RouteContract>

/** Types an area's contracts (route name -> contract). */
export function defineContracts<const T extends RouteContracts>(contracts: T): T {
  return contracts
}

/** Every route's contract, by route name (filled by start/openapi.ts). */
class ContractRegistry {
  #contracts = new Map<string, RouteContract>()

  register(contracts: RouteContracts) {
    for (const [name, contract] of Object.entries(contracts)) {
      if (this.#contracts.has(name)) throw new Error(`OpenAPI: two contracts for route "${name}"`)
      this.#contracts.set(name, contract)
    }
  }

  get(routeName: string | undefined): RouteContract | undefined {
    return routeName ? this.#contracts.get(routeName) : undefined
  }

  names(): string[] {
    return [...this.#contracts.keys()]
  }
}

export const apiContracts = new ContractRegistry()
