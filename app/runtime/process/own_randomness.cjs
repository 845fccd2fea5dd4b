'use strict'
/*
 * Random state of its own in every Node.js process of a fixed-layout agent
 * (docs/runtime.md "New agents from a template"; written into the runtime
 * cache by own_randomness.ts, loaded with NODE_OPTIONS=--require).
 *
 * Agents restored from one template go on with the memory of its processes:
 * whatever random values a process drew ahead and kept, each copy hands out
 * again. OpenSSL's generator is reseeded in each copy (file_identity_shim.c),
 * but Node.js and V8 keep batches of their own: crypto.randomUUID's (128
 * UUIDs drawn at once), crypto.randomInt's (6 KB), and V8's Math.random (a
 * xorshift128+ state and a cache of 64 numbers). Here they come from
 * OpenSSL, which a copy's reseed makes its own: randomUUID with its own
 * disableEntropyCache; Math.random and randomInt from a small pool of
 * OpenSSL's bytes that is refilled once it is LIFETIME_MS old by the wall
 * clock. A copy is restored seconds after the template's dump (the dump
 * alone writes its memory), so its first draw always refills. The wall
 * clock, not the monotonic one: CRIU restores into a time namespace whose
 * monotonic clock goes on from the dump as if no time had passed. Measured
 * here (Node 24, a loaded host): a million Math.random took 2.8 s drawing
 * from OpenSSL per call, 0.16 s from the pool, 0.04 s V8's own.
 */
const crypto = require('node:crypto')
const { syncBuiltinESMExports } = require('node:module')

const fill = crypto.randomFillSync
const nodeRandomUUID = crypto.randomUUID
const nodeRandomInt = crypto.randomInt

/** Random words drawn ahead from OpenSSL, handed out for LIFETIME_MS at most. */
const LIFETIME_MS = 50
const pool = new Uint32Array(128)
let used = pool.length
let filledAt = 0
// Its own reference: a program that fakes Date.now (test timers) does not stop the refills.
const wallClock = Date.now
function word() {
  const now = wallClock()
  // A clock set back: refilled too.
  if (used === pool.length || now - filledAt > LIFETIME_MS || now < filledAt) {
    fill(pool)
    used = 0
    filledAt = now
  }
  return pool[used++]
}

/** Math.random: 53 bits, as V8 makes them of its own state. */
function random() {
  return ((word() >>> 5) * 67108864 + (word() >>> 6)) / 9007199254740992
}

/** crypto.randomUUID, never from a batch drawn before the call. */
function randomUUID(options) {
  // Anything but an options object: Node.js's own error.
  if (options !== undefined && (options === null || typeof options !== 'object')) {
    return nodeRandomUUID(options)
  }
  return nodeRandomUUID({ ...options, disableEntropyCache: true })
}

/** crypto.randomInt's range and rejection (lib/internal/crypto/random.js) over 48-bit draws. */
const RAND_MAX = 0xffff_ffff_ffff
function randomInt(min, max, callback) {
  let low = min
  let high = max
  let done = callback
  if (typeof max === 'undefined' || typeof max === 'function') {
    done = max
    high = min
    low = 0
  }
  const valid =
    (done === undefined || typeof done === 'function') &&
    Number.isSafeInteger(low) &&
    Number.isSafeInteger(high) &&
    high > low &&
    high - low <= RAND_MAX
  // Anything it refuses: Node.js's own error, thrown by its own function.
  if (!valid) return nodeRandomInt.apply(this, arguments)
  const range = high - low
  const limit = RAND_MAX - (RAND_MAX % range)
  let drawn
  do {
    drawn = (word() & 0xffff) * 0x1_0000_0000 + word()
  } while (drawn >= limit)
  const value = (drawn % range) + low
  if (done === undefined) return value
  process.nextTick(done, undefined, value)
}

Object.defineProperty(Math, 'random', {
  value: random,
  writable: true,
  enumerable: false,
  configurable: true,
})
crypto.randomUUID = randomUUID
crypto.randomInt = randomInt
// `import { randomUUID } from 'node:crypto'` reads the module's exports as they are now.
syncBuiltinESMExports()

// Web Crypto's randomUUID (globalThis.crypto) calls Node.js's batched one directly.
const web = crypto.webcrypto
const prototype = Object.getPrototypeOf(web)
const webRandomUUID = prototype.randomUUID
Object.defineProperty(prototype, 'randomUUID', {
  ...Object.getOwnPropertyDescriptor(prototype, 'randomUUID'),
  value: function randomUUID() {
    return this === web ? nodeRandomUUID({ disableEntropyCache: true }) : webRandomUUID.call(this)
  },
})

// Its own --require is taken out of NODE_OPTIONS again (worker threads still load it: Node.js
// parsed the option at start), so the framework sees the environment its plugin gave it:
// OpenClaw turns its fast module resolution off when a preload is named there (seconds of every
// boot). Processes it starts later do not load it: they begin after any restore, with random
// state of their own.
const own = `--require=${__filename}`
const rest = (process.env.NODE_OPTIONS ?? '')
  .split(' ')
  .filter((option) => option && option !== own)
  .join(' ')
if (rest) process.env.NODE_OPTIONS = rest
else delete process.env.NODE_OPTIONS
