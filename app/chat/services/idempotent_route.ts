import type { HttpContext } from '@adonisjs/core/http'
import {
  IDEMPOTENCY_HEADER,
  idempotencyKeyOf,
  startIdempotent,
  type IdempotencyTicket,
} from '#chat/services/idempotency'

/**
 * Runs a JSON chat route once per Idempotency-Key: a retry answers the
 * stored result (marked `Idempotency-Replayed: true`) without running
 * `work` again. Without the header, `work` just runs.
 */
export async function idempotentJson<T>(
  ctx: HttpContext,
  scope: { scope: string; route: string; request: unknown },
  work: () => Promise<T>
): Promise<T> {
  const key = idempotencyKeyOf(ctx.request.header(IDEMPOTENCY_HEADER))
  if (!key) return work()
  const start = await startIdempotent({ ...scope, key })
  if (start.replay) {
    ctx.response.header('Idempotency-Replayed', 'true')
    ctx.response.status(start.statusCode)
    return start.response as T
  }
  return runTicket(start.ticket, work)
}

export async function runTicket<T>(ticket: IdempotencyTicket, work: () => Promise<T>): Promise<T> {
  let result: T
  try {
    result = await work()
  } catch (error) {
    await ticket.release()
    throw error
  }
  await ticket.complete(result)
  return result
}
