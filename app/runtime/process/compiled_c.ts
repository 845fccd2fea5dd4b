import { spawnSync } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs'
import { join } from 'node:path'

/** A C source of this folder compiled with gcc (a library or a program), or why not. */
export type Compiled = { path: string } | { reason: string }

/** Where the runtime cache keeps what is compiled here (read-only to agents). */
export function compiledFilesDir(cacheDir: string): string {
  return join(cacheDir, 'sandbox')
}

const built = new Map<string, Compiled>()

/**
 * `source` (a file of this folder) compiled into `dir` (the runtime cache,
 * read-only to agents), its name the hash of its source: a new source is a
 * new file. Built once per process, at the first use (~0.2 s). `flags` are
 * gcc's, before the output (`-shared -fPIC` makes a library).
 */
export function compiledC(
  dir: string,
  source: string,
  options: { name: string; flags?: string[]; libraries?: string[] }
): Compiled {
  const key = `${dir}\0${source}`
  const known = built.get(key)
  if (known) return known
  const result = compile(dir, join(import.meta.dirname, source), options)
  built.set(key, result)
  return result
}

function compile(
  dir: string,
  source: string,
  options: { name: string; flags?: string[]; libraries?: string[] }
): Compiled {
  let text: Buffer
  try {
    text = readFileSync(source)
  } catch (error) {
    return { reason: `its source is missing (${(error as Error).message})` }
  }
  const hash = createHash('sha256').update(text).digest('hex').slice(0, 16)
  const path = join(
    dir,
    `${options.name}-${process.arch}-${hash}${options.flags?.includes('-shared') ? '.so' : ''}`
  )
  if (existsSync(path)) return { path }
  mkdirSync(dir, { recursive: true })
  // A name of its own per build (two services on one storage may build at once).
  const partial = `${path}.${process.pid}.${randomBytes(6).toString('hex')}`
  const gcc = spawnSync(
    'gcc',
    [...(options.flags ?? []), '-O2', '-Wall', '-o', partial, source, ...(options.libraries ?? [])],
    { encoding: 'utf8', timeout: 60_000 }
  )
  if (gcc.status !== 0) {
    rmSync(partial, { force: true })
    const why = gcc.error?.message ?? gcc.stderr.trim().split('\n').slice(-3).join(' ')
    return { reason: `gcc could not build it (${why})` }
  }
  renameSync(partial, path)
  return { path }
}
