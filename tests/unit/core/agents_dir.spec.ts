import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { agentsDir } from '#core/bootstrap/paths'

/** A checkout-like folder (package.json) of its own: agentsDir decides once per checkout. */
function checkout(): string {
  const root = mkdtempSync(join(tmpdir(), 'checkout-'))
  writeFileSync(join(root, 'package.json'), '{}')
  return root
}

test.group('Agents folder location', (group) => {
  const saved = { AGENTS_DIR: process.env.AGENTS_DIR, STORAGE_DIR: process.env.STORAGE_DIR }
  const made: string[] = []
  group.each.setup(() => {
    delete process.env.AGENTS_DIR
    delete process.env.STORAGE_DIR
  })
  group.teardown(() => {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key]
      else process.env[key] = value
    }
    for (const root of made) rmSync(root, { recursive: true, force: true })
  })

  test('by default outside the checkout, one folder per checkout', ({ assert }) => {
    const [first, second] = [checkout(), checkout()]
    made.push(first, second)
    const chosen = agentsDir(first)
    assert.isFalse(chosen.startsWith(first), `${chosen} is outside ${first}`)
    assert.notEqual(chosen, agentsDir(second))
    assert.equal(agentsDir(first), chosen, 'stable')
  })

  test('AGENTS_DIR, then STORAGE_DIR, decide when set', ({ assert }) => {
    const root = checkout()
    made.push(root)
    process.env.STORAGE_DIR = join(root, 'elsewhere')
    assert.equal(agentsDir(root), join(root, 'elsewhere', 'agents'))
    process.env.AGENTS_DIR = join(root, 'agents-here')
    assert.equal(agentsDir(root), join(root, 'agents-here'))
  })

  test('an install whose storage/agents already holds agents keeps them there', ({ assert }) => {
    const root = checkout()
    made.push(root)
    mkdirSync(join(root, 'storage', 'agents', 'an-agent'), { recursive: true })
    assert.equal(agentsDir(root), join(root, 'storage', 'agents'))
  })
})
