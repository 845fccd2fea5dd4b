import encryption from '@adonisjs/core/services/encryption'

/**
 * Secrets in agent config (CONTRACT.md): the value of any key whose name
 * ends in key, token, secret or password (any case, any depth) is stored
 * encrypted and answered as `***`; a PATCH sending `***` back keeps the
 * stored value. Every function here works on plain JSON objects and
 * returns a new object (inputs are never modified).
 */
export const MASK = '***'

const SECRET_KEY = /(key|token|secret|password)$/i

/** Keys that must never become own properties of a merged object. */
const UNSAFE_KEYS = new Set(['__proto__', 'constructor', 'prototype'])

export type Config = Record<string, unknown>

export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key)
}

function isPlainObject(value: unknown): value is Config {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function hasValue(value: unknown): boolean {
  return value !== null && value !== undefined && value !== ''
}

/** Copies `value`, replacing the value of every secret key by `transform(value)`. */
function mapSecrets(value: unknown, transform: (secret: unknown) => unknown): unknown {
  if (Array.isArray(value)) return value.map((item) => mapSecrets(item, transform))
  if (!isPlainObject(value)) return value
  const out: Config = {}
  for (const [key, inner] of Object.entries(value)) {
    if (UNSAFE_KEYS.has(key)) continue
    out[key] = isSecretKey(key) && hasValue(inner) ? transform(inner) : mapSecrets(inner, transform)
  }
  return out
}

/** For answers (detail, by-slug, versions, snapshots, export): secrets as `***`. */
export function maskSecrets(config: Config): Config {
  return mapSecrets(config, () => MASK) as Config
}

/** For storage: each secret value becomes the ciphertext of its JSON. */
export function encryptSecrets(config: Config): Config {
  return mapSecrets(config, (secret) => encryption.encrypt(JSON.stringify(secret))) as Config
}

/** The clear config (for the runtime, merges and validation). Undecryptable values become null. */
export function decryptSecrets(config: Config): Config {
  return mapSecrets(config, (stored) => {
    if (typeof stored !== 'string') return null
    const json = encryption.decrypt<string>(stored)
    if (typeof json !== 'string') return null
    try {
      return JSON.parse(json)
    } catch {
      return null
    }
  }) as Config
}

/** The clear secret values of a config (to redact them from text such as logs). */
export function secretValues(config: Config): string[] {
  const found: string[] = []
  mapSecrets(config, (secret) => {
    if (typeof secret === 'string') found.push(secret)
    else found.push(JSON.stringify(secret))
    return secret
  })
  return found
}

/** Drops `***` sent for secret keys that have nothing stored to keep. */
export function stripMasks(config: Config): Config {
  return mergeConfig({}, config)
}

/**
 * Deep merge of a PATCH into the (clear) existing config: objects merge key
 * by key, anything else replaces; `null` removes the key (JSON merge patch);
 * `***` for a secret key keeps the stored value (or sets nothing).
 */
export function mergeConfig(existing: Config, patch: Config): Config {
  const out: Config = {}
  for (const [key, value] of Object.entries(existing)) {
    if (!UNSAFE_KEYS.has(key)) out[key] = value
  }
  for (const [key, value] of Object.entries(patch)) {
    if (UNSAFE_KEYS.has(key)) continue
    if (value === MASK && isSecretKey(key)) continue
    if (value === null) {
      delete out[key]
    } else if (isPlainObject(value)) {
      out[key] = mergeConfig(isPlainObject(out[key]) ? out[key] : {}, value)
    } else if (Array.isArray(value)) {
      out[key] = value.map((item) => (isPlainObject(item) ? stripMasks(item) : item))
    } else {
      out[key] = value
    }
  }
  return out
}
