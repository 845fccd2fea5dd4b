import { errors as vineErrors } from '@vinejs/vine'
import { errors as bouncerErrors, type AuthorizationResponse } from '@adonisjs/bouncer'
import {
  ApiException,
  ForbiddenException,
  NotFoundException,
} from '#core/exceptions/api_exceptions'

export interface ErrorEnvelope {
  success: false
  error: string
  code: string
}

export interface MappedError {
  status: number
  body: ErrorEnvelope
  /** True when the error is ours to fix (logged with its stack). */
  unexpected: boolean
}

interface VineMessage {
  field: string
  message: string
  rule: string
}

/**
 * Error codes raised by the framework and its packages, mapped to the spec's
 * codes. Anything not listed here and not an ApiException is a 500.
 */
const FRAMEWORK_CODES: Record<string, { status: number; code: string; message?: string }> = {
  E_ROUTE_NOT_FOUND: { status: 404, code: 'NOT_FOUND', message: 'Route not found' },
  E_ROW_NOT_FOUND: { status: 404, code: 'NOT_FOUND', message: 'Resource not found' },
  E_UNAUTHORIZED_ACCESS: { status: 401, code: 'AUTH_REQUIRED', message: 'Authentication required' },
  E_TOO_MANY_REQUESTS: { status: 429, code: 'RATE_LIMIT_EXCEEDED', message: 'Rate limit exceeded' },
  E_REQUEST_ENTITY_TOO_LARGE: {
    status: 413,
    code: 'VALIDATION_ERROR',
    message: 'The request body is too large',
  },
  E_ENCODING_UNSUPPORTED: { status: 400, code: 'VALIDATION_ERROR' },
  E_BAD_CSRF_TOKEN: {
    status: 403,
    code: 'FORBIDDEN',
    message: 'The form was not sent from this console page (or it expired); reload and try again',
  },
  E_INVALID_MULTIPART_REQUEST: { status: 400, code: 'VALIDATION_ERROR' },
}

function envelope(status: number, code: string, error: string, unexpected = false): MappedError {
  return { status, body: { success: false, error, code }, unexpected }
}

/**
 * A policy's denial (`bouncer.authorize`) as the API error it stands for:
 * 404 NOT_FOUND where the policy hides the resource, else 403 FORBIDDEN;
 * the policy's message, or the error's default when it gave none.
 */
function denialOf(response: AuthorizationResponse): ApiException {
  const message = response.message || undefined
  return response.status === 404 ? new NotFoundException(message) : new ForbiddenException(message)
}

function describeValidation(messages: VineMessage[]): string {
  return messages.map((m) => `${m.message} (field "${m.field}", rule "${m.rule}")`).join('; ')
}

/**
 * Turns any thrown value into the spec's failure envelope and a status.
 * Never puts a stack, SQL or internal message into an unexpected error's body.
 */
export function mapError(error: unknown): MappedError {
  if (error instanceof bouncerErrors.E_AUTHORIZATION_FAILURE) error = denialOf(error.response)
  if (error instanceof ApiException) {
    return envelope(error.status, error.apiCode, error.message)
  }

  if (error instanceof vineErrors.E_VALIDATION_ERROR) {
    return envelope(400, 'VALIDATION_ERROR', describeValidation(error.messages as VineMessage[]))
  }

  const err = error as { code?: string; status?: number; message?: string; type?: string }

  // The JSON body parser throws a SyntaxError (400) for malformed JSON and a
  // 422 Exception for a scalar top-level value: both are a bad body to us.
  if (error instanceof SyntaxError && err.status === 400) {
    return envelope(400, 'VALIDATION_ERROR', 'Malformed JSON in request body')
  }
  // Anything else the body parser marks as the client's fault, e.g. a JSON
  // body nested so deep that parsing overflows the stack (a RangeError).
  if (err.status === 400 && !err.code) {
    return envelope(400, 'VALIDATION_ERROR', 'The request body could not be parsed')
  }
  if (err.status === 422 && err.message?.startsWith('Invalid JSON')) {
    return envelope(400, 'VALIDATION_ERROR', 'The JSON body must be an object or an array')
  }

  const known = err.code ? FRAMEWORK_CODES[err.code] : undefined
  if (known) {
    return envelope(known.status, known.code, known.message ?? err.message ?? known.code)
  }

  return envelope(500, 'SERVER_ERROR', 'Internal server error', true)
}
