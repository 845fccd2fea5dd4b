import hash from '@adonisjs/core/services/hash'
import PQueue from 'p-queue'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'

/**
 * Every password hash and check goes through one queue: at most two at a
 * time (each takes about a second and 128 MiB at the configured cost, and
 * runs on libuv's thread pool, which file reads share), with a bounded
 * number waiting. Beyond it the request gets 503 with Retry-After instead
 * of a growing pile of hashes. p-queue: a maintained queue with these
 * knobs, rather than a semaphore of our own.
 */
export const hashingLimits = {
  concurrent: 2,
  waiting: 32,
}

const queue = new PQueue({ concurrency: hashingLimits.concurrent })

function run<T>(work: () => Promise<T>): Promise<T> {
  queue.concurrency = hashingLimits.concurrent
  if (queue.size >= hashingLimits.waiting) {
    throw new ServiceUnavailableException(
      'Too many sign-ins are being checked right now; please retry in a moment',
      { headers: { 'Retry-After': '2' } }
    )
  }
  return queue.add(work)
}

export function hashPassword(plain: string): Promise<string> {
  return run(() => hash.make(plain))
}

export function verifyPassword(hashed: string, plain: string): Promise<boolean> {
  return run(() => hash.verify(hashed, plain))
}

/** True when `hashed` was made at another cost than the configured one. */
export function needsRehash(hashed: string): boolean {
  return hash.needsReHash(hashed)
}
