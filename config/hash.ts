import { defineConfig, drivers } from '@adonisjs/core/hash'

/**
 * scrypt at OWASP's recommended cost (N = 2^17, r = 8, p = 1: 128 MiB and
 * about a second per hash on a 2-core host). PASSWORD_HASH_COST changes N
 * (a power of two; the test run uses 2^14 to stay fast). Hashes made at
 * another cost are redone at the next sign-in (session_service). Hashing
 * runs through a bounded queue (password_hashing.ts), so a burst of
 * sign-ins cannot exhaust memory or the thread pool.
 */
export const DEFAULT_PASSWORD_HASH_COST = 2 ** 17

const cost = Number(process.env.PASSWORD_HASH_COST ?? DEFAULT_PASSWORD_HASH_COST)

const hashConfig = defineConfig({
  default: 'scrypt',
  list: {
    scrypt: drivers.scrypt({
      cost,
      blockSize: 8,
      parallelization: 1,
      // Twice what one hash needs (128 * N * r bytes).
      maxMemory: 2 * 128 * cost * 8,
    }),
  },
})

export default hashConfig

declare module '@adonisjs/core/types' {
  export interface HashersList extends InferHashers<typeof hashConfig> {}
}
