/**
 * Keeps package-lock.json installable with `npm ci` when the registry lacks
 * other platforms' optional binaries (the registry here serves only the
 * linux-x64 build of some packages, e.g. litesvm). `npm install` then records
 * a package's full optionalDependencies list but only the entries it could
 * resolve, and `npm ci` refuses the lock as out of sync. This drops, from
 * each lock entry, the optional dependencies that have no entry of their own.
 * Idempotent; prints what it removed.
 */
import { readFileSync, writeFileSync } from 'node:fs'

const file = new URL('../package-lock.json', import.meta.url)
const lock = JSON.parse(readFileSync(file, 'utf8'))
const removed = []

for (const [path, entry] of Object.entries(lock.packages ?? {})) {
  if (!entry.optionalDependencies) continue
  for (const name of Object.keys(entry.optionalDependencies)) {
    const nested = `${path ? `${path}/` : ''}node_modules/${name}`
    if (!lock.packages[nested] && !lock.packages[`node_modules/${name}`]) {
      delete entry.optionalDependencies[name]
      removed.push(`${path || '(root)'} -> ${name}`)
    }
  }
  if (Object.keys(entry.optionalDependencies).length === 0) delete entry.optionalDependencies
}

if (removed.length > 0) {
  writeFileSync(file, `${JSON.stringify(lock, null, 2)}\n`)
  console.log(`package-lock.json: dropped ${removed.length} unavailable optional dependencies`)
  for (const line of removed) console.log(`  ${line}`)
}
