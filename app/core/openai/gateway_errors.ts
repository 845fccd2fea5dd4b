import { ServiceUnavailableException, ValidationException } from '#core/exceptions/api_exceptions'
import { CompletionStreamError } from '#core/openai/wire'

/**
 * The one mapping from a model upstream's failures (the hosted provider, a
 * customer's provider, an agent's framework) to the service's errors. Every
 * failure is a 503 SERVER_ERROR naming the upstream, except a refusal of a
 * body the client wrote itself (the model proxy forwards it), which is the
 * client's to fix: 400 VALIDATION_ERROR.
 */

/** Who answers at the other end of a gateway call, as its errors name it. */
export interface UpstreamParty {
  /** How messages name it: "The model provider", "OpenAI", "The agent's framework". */
  name: string
  /**
   * The body sent is the client's own request (the model proxy forwards its
   * fields): a 400, 404, 413 or 422 is the client's mistake and answers 400.
   */
  clientBody?: boolean
  /** The credential it is called with, named when it answers 401 or 403 ("the agent's API key"). */
  credential?: string
}

export type UpstreamFailureKind =
  /** No connection, or no answer within the bound. */
  | 'unavailable'
  /** A non-2xx answer. */
  | 'status'
  /** An error object in a 2xx answer or inside the stream. */
  | 'reported'
  /** A 2xx answer that is not a completion. */
  | 'unreadable'
  /** The connection broke, or the stream fell silent, while the answer was read. */
  | 'broke_off'
  /** The stream ended without its end marker. */
  | 'cut_short'

export interface UpstreamFailure {
  kind: UpstreamFailureKind
  /** The upstream's HTTP status (kind `status`). */
  status?: number
  /** What went wrong, in the upstream's or the connection's words. */
  detail?: string
}

/** The statuses that say the request itself was wrong (the provider read it and refused it). */
const REFUSALS_OF_THE_REQUEST = new Set([400, 404, 413, 422])

/** The model upstream failed (503 SERVER_ERROR). The chat falls back past a failing container on it. */
export class ModelGatewayError extends ServiceUnavailableException {
  readonly kind: UpstreamFailureKind
  readonly upstreamStatus?: number

  constructor(failure: UpstreamFailure, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.kind = failure.kind
    this.upstreamStatus = failure.status
  }
}

/** The provider refused a body the client wrote (400 VALIDATION_ERROR). */
export class UpstreamRefusedRequestError extends ValidationException {
  constructor(
    readonly upstreamStatus: number,
    message: string
  ) {
    super(message)
  }
}

function messageOf(party: UpstreamParty, failure: UpstreamFailure): string {
  const detail = failure.detail ? `: ${failure.detail}` : ''
  switch (failure.kind) {
    case 'unavailable':
      return `${party.name} is unavailable${detail}`
    case 'status':
      return party.credential && (failure.status === 401 || failure.status === 403)
        ? `${party.name} refused ${party.credential} (${failure.status})${detail}`
        : `${party.name} answered ${failure.status}${detail}`
    case 'reported':
      return `${party.name} failed${detail}`
    case 'unreadable':
      return `${party.name} answered something unreadable${failure.detail ? ` (${failure.detail})` : ''}`
    case 'broke_off':
      return `${party.name} broke off${detail}`
    case 'cut_short':
      return `${party.name} ended the stream early`
  }
}

/** The service's error for an upstream failure. */
export function upstreamFailure(
  party: UpstreamParty,
  failure: UpstreamFailure,
  cause?: unknown
): ModelGatewayError | UpstreamRefusedRequestError {
  if (
    failure.kind === 'status' &&
    party.clientBody &&
    REFUSALS_OF_THE_REQUEST.has(failure.status!)
  ) {
    return new UpstreamRefusedRequestError(
      failure.status!,
      `${party.name} refused the request${failure.detail ? `: ${failure.detail}` : ''}`
    )
  }
  return new ModelGatewayError(failure, messageOf(party, failure), { cause })
}

/**
 * What a failure while an answer is read becomes: the caller's own abort
 * stays itself (its caller went away; nobody reads an error), an error the
 * upstream reported says so, anything else broke the answer off.
 */
export function readFailure(party: UpstreamParty, error: unknown, signal?: AbortSignal): unknown {
  if (signal?.aborted) return error
  if (error instanceof ModelGatewayError || error instanceof UpstreamRefusedRequestError) {
    return error
  }
  if (error instanceof CompletionStreamError) {
    return upstreamFailure(party, { kind: 'reported', detail: error.message })
  }
  return upstreamFailure(
    party,
    { kind: 'broke_off', detail: error instanceof Error ? error.message : String(error) },
    error
  )
}
