import { createHash, randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/**
 * Random state of its own in every agent restored from a template
 * (docs/runtime.md "New agents from a template"): own_randomness.cjs,
 * preloaded into every Node.js process of a fixed-layout agent, keeps no
 * random values drawn ahead (crypto.randomUUID's and randomInt's batches,
 * Math.random's state), so that what a copy draws comes from OpenSSL, which
 * each copy reseeds (file_identity_shim.c).
 */

const SOURCE = join(import.meta.dirname, 'own_randomness.cjs')

const written = new Map<string, { path: string } | { reason: string }>()

/**
 * The preload written into `dir` (the runtime cache, read-only to agents),
 * named by the hash of its source: a new source is a new file, so a
 * template of the old one is stale (its environment names the file).
 */
export function ownRandomnessPreload(dir: string): { path: string } | { reason: string } {
  const known = written.get(dir)
  if (known) return known
  let result: { path: string } | { reason: string }
  try {
    const source = readFileSync(SOURCE)
    const hash = createHash('sha256').update(source).digest('hex').slice(0, 16)
    const path = join(dir, `own-randomness-${hash}.cjs`)
    if (!existsSync(path)) {
      mkdirSync(dir, { recursive: true })
      // A name of its own per write (two services on one storage may write it at once).
      const partial = `${path}.${process.pid}.${randomBytes(6).toString('hex')}`
      writeFileSync(partial, source, { mode: 0o644 })
      renameSync(partial, path)
    }
    result = /["\s]/.test(path) ? { reason: `its path has a space or quote (${path})` } : { path }
  } catch (error) {
    result = { reason: (error as Error).message }
  }
  written.set(dir, result)
  return result
}

/** NODE_OPTIONS with the preload added to the plugin's own (if any). */
export function withPreload(nodeOptions: string | undefined, path: string): string {
  return [nodeOptions, `--require=${path}`].filter(Boolean).join(' ')
}
