import type { HttpContext } from '@adonisjs/core/http'
import type { NextFn } from '@adonisjs/core/types/http'
import { PayloadTooLargeException } from '#core/exceptions/api_exceptions'

/**
 * Request body size by route class, checked from Content-Length before the
 * body parser reads anything (413 VALIDATION_ERROR naming the limit). The
 * body parser's own JSON limit (config/bodyparser.ts) is the largest class,
 * so a chunked body without Content-Length is capped there.
 */
export const BODY_LIMITS = {
  /** Container file writes: a 5 MiB file as a JSON string, with room for escaping. */
  files: 6 * 1024 * 1024,
  /** Knowledge uploads (500 KB of text), chat history replacement, model proxy requests. */
  large: 1024 * 1024,
  /** Chat messages with history, webhooks, agent config. */
  medium: 256 * 1024,
  /**
   * Agent archive uploads (POST /agents/import): streamed to disk, their own
   * cap (BACKUP_MAX_ARCHIVE_MB, config/backups.ts) is checked as they arrive
   * and answered 400; this only keeps the other classes' limits off them.
   */
  archive: Number.MAX_SAFE_INTEGER,
  /** Everything else: sign-in, billing, support, keys... */
  small: 64 * 1024,
} as const

const CLASSES: Array<[RegExp, keyof typeof BODY_LIMITS]> = [
  [/^\/agents\/import$/, 'archive'],
  [/\/container-files(\/write)?$/, 'files'],
  [/\/knowledge$|\/chat\/history$|^\/v1\/chat\/completions$/, 'large'],
  [
    /\/chat(\/stream)?$|^\/webhooks\/in\/|^\/agents(\/:id)?$|^\/agents\/test-chat$|\/config-snapshots|\/versions/,
    'medium',
  ],
]

export function bodyLimitFor(pattern: string): { name: keyof typeof BODY_LIMITS; bytes: number } {
  const name = CLASSES.find(([test]) => test.test(pattern))?.[1] ?? 'small'
  return { name, bytes: BODY_LIMITS[name] }
}

export default class BodyLimitMiddleware {
  async handle(ctx: HttpContext, next: NextFn) {
    const length = Number(ctx.request.header('content-length') ?? 0)
    if (length > 0) {
      const limit = bodyLimitFor(ctx.route?.pattern ?? '')
      if (length > limit.bytes) {
        throw new PayloadTooLargeException(
          `The request body is ${length} bytes; this route accepts at most ${limit.bytes}`
        )
      }
    }
    return next()
  }
}
