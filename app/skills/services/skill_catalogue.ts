import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import app from '@adonisjs/core/services/app'
import { parse as parseYaml } from 'yaml'
import { SKILL_ID } from '#runtime/skill_files'

/**
 * The skills catalogue shipped in the repository: `skills/<id>/SKILL.md`,
 * each an AgentSkills file (YAML front matter `name`, `description`, and a
 * `metadata` map with our `title` and `frameworks`) that OpenClaw and Hermes
 * load as it is. Read once per process: the files ship with the release.
 */
export interface CatalogueSkill {
  id: string
  name: string
  description: string
  frameworks: string[]
  category: string | null
  /** The whole SKILL.md, front matter included, as the frameworks read it. */
  content: string
}

const FRONT_MATTER = /^---\r?\n([\s\S]*?)\r?\n---\r?\n/

/** Parses one SKILL.md; throws naming the file when it breaks the catalogue's rules. */
export function parseSkill(id: string, content: string): CatalogueSkill {
  const fail = (reason: string) => new Error(`skills/${id}/SKILL.md: ${reason}`)
  if (!SKILL_ID.test(id)) throw fail('the folder name must be lowercase words joined by hyphens')
  const match = FRONT_MATTER.exec(content)
  if (!match) throw fail('no YAML front matter')
  const front = parseYaml(match[1]) as Record<string, any> | null
  if (front?.name !== id) throw fail('front matter `name` must equal the folder name')
  if (typeof front.description !== 'string' || !front.description.trim()) {
    throw fail('front matter `description` is missing')
  }
  const metadata = (front.metadata ?? {}) as Record<string, unknown>
  const frameworks = String(metadata.frameworks ?? '')
    .split(/[\s,]+/)
    .filter(Boolean)
  if (frameworks.length === 0) throw fail('metadata.frameworks names no framework')
  return {
    id,
    name: typeof metadata.title === 'string' ? metadata.title : id,
    description: front.description.trim(),
    frameworks,
    category: typeof metadata.category === 'string' ? metadata.category : null,
    content,
  }
}

export function loadCatalogue(dir: string): Map<string, CatalogueSkill> {
  const skills = new Map<string, CatalogueSkill>()
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue
    const content = readFileSync(join(dir, entry.name, 'SKILL.md'), 'utf8')
    skills.set(entry.name, parseSkill(entry.name, content))
  }
  return new Map([...skills].sort(([a], [b]) => a.localeCompare(b)))
}

let catalogue: Map<string, CatalogueSkill> | undefined

/** Every catalogue skill by id, sorted by id. */
export function skillCatalogue(): Map<string, CatalogueSkill> {
  catalogue ??= loadCatalogue(app.makePath('skills'))
  return catalogue
}

export function catalogueSkill(id: string): CatalogueSkill | undefined {
  return skillCatalogue().get(id)
}

/**
 * The installed skills' files for an agent's runtime spec; ids that left the
 * catalogue since they were installed are skipped.
 */
export function skillFilesFor(installed: readonly string[]): { id: string; content: string }[] {
  return installed.flatMap((id) => {
    const skill = catalogueSkill(id)
    return skill ? [{ id, content: skill.content }] : []
  })
}
