import { Exception } from '@adonisjs/core/exceptions'

/**
 * Base of every error a client may see. Features throw these; the exception
 * handler turns them into `{ success: false, error, code }` with the status.
 */
export abstract class ApiException extends Exception {
  abstract readonly apiCode: string
  /** Extra answer headers, e.g. Retry-After on a 429. */
  readonly headers: Record<string, string>

  constructor(
    message: string,
    options?: { status?: number; cause?: unknown; headers?: Record<string, string> }
  ) {
    super(message, { status: options?.status, cause: options?.cause })
    this.headers = options?.headers ?? {}
  }
}

interface ApiExceptionOptions {
  cause?: unknown
  headers?: Record<string, string>
}

/**
 * One class per failure kind. Only the spec's codes (and the four
 * CONTRACT.md adds) exist: there is no CONFLICT code; a dependency that is
 * down answers 503 with SERVER_ERROR, an oversized body 413 with
 * VALIDATION_ERROR.
 */
function defineApiException(status: number, apiCode: string, defaultMessage: string) {
  return class extends ApiException {
    static status = status
    readonly apiCode = apiCode

    constructor(message: string = defaultMessage, options?: ApiExceptionOptions) {
      super(message, { status, cause: options?.cause, headers: options?.headers })
    }
  }
}

/** 400: invalid body, query or parameters. */
export class ValidationException extends defineApiException(
  400,
  'VALIDATION_ERROR',
  'The request is invalid'
) {}

/** 401: missing or invalid credential. */
export class AuthRequiredException extends defineApiException(
  401,
  'AUTH_REQUIRED',
  'Authentication required'
) {}

/** 402: hosted model usage with no AI Credits left. */
export class InsufficientCreditsException extends defineApiException(
  402,
  'INSUFFICIENT_CREDITS',
  'Not enough AI Credits for this request'
) {}

/** 403: authenticated but not allowed to touch this resource. */
export class ForbiddenException extends defineApiException(
  403,
  'FORBIDDEN',
  'You are not allowed to access this resource'
) {}

/** 403: sign-in attempted before the e-mail address was verified. */
export class EmailNotVerifiedException extends defineApiException(
  403,
  'EMAIL_NOT_VERIFIED',
  'Verify your e-mail address before signing in'
) {}

/** 404: unknown route, row or resource. */
export class NotFoundException extends defineApiException(404, 'NOT_FOUND', 'Resource not found') {}

/**
 * 405: a known path asked with a method it does not have. CONTRACT.md allows no
 * code beyond the spec's, so it carries NOT_FOUND (no such operation) and an
 * `Allow` header naming the methods the path has.
 */
export class MethodNotAllowedException extends defineApiException(
  405,
  'NOT_FOUND',
  'Method not allowed'
) {}

/** 409: a container-only operation on an agent whose container is not running. */
export class AgentNotRunningException extends defineApiException(
  409,
  'AGENT_NOT_RUNNING',
  'The agent must be running for this action'
) {}

/** 410: retired routes. */
export class GoneException extends defineApiException(
  410,
  'GONE',
  'This endpoint has been retired'
) {}

/** 413: request body over the size limit. */
export class PayloadTooLargeException extends defineApiException(
  413,
  'VALIDATION_ERROR',
  'The request body is too large'
) {}

/** 422: content refused by the safety filter. */
export class ContentBlockedException extends defineApiException(
  422,
  'CONTENT_BLOCKED',
  'The message was blocked by the content safety filter'
) {}

/** 429: daily request limit or another rate limit reached. */
export class RateLimitExceededException extends defineApiException(
  429,
  'RATE_LIMIT_EXCEEDED',
  'Rate limit exceeded'
) {
  /** A 429 that tells the client when to come back (Retry-After, whole seconds). */
  static retryAfter(message: string, seconds: number) {
    return new RateLimitExceededException(message, {
      headers: { 'Retry-After': String(Math.max(1, Math.ceil(seconds))) },
    })
  }
}

/** 503: a dependency the request needs is not available (database, price feed). */
export class ServiceUnavailableException extends defineApiException(
  503,
  'SERVER_ERROR',
  'The service is temporarily unavailable'
) {}
