import { afterReply } from '#core/http/after_reply'

/**
 * The in-process service's writes that end just after its answers (a chat's
 * store and settlement, after_reply.ts), done: call it before reading the
 * database directly after an answer. The service's own reads wait for them;
 * a test's query does not.
 */
export function answersWritten(): Promise<void> {
  return afterReply.drain()
}
