import type { AgentSkillFile, FrameworkPlugin, RenderedFile } from '#plugins/types'

/** Catalogue ids are folder names: lowercase words joined by hyphens. */
export const SKILL_ID = /^[a-z0-9]+(?:-[a-z0-9]+)*$/

/** The folder of one skill inside the framework's skills folder, relative to its root. */
export function skillFolder(plugin: FrameworkPlugin, skillId: string): string {
  if (!plugin.skillsDir) throw new Error(`${plugin.name} does not load skills`)
  if (!SKILL_ID.test(skillId)) throw new Error(`Invalid skill id ${JSON.stringify(skillId)}`)
  return `${plugin.skillsDir.path}/${skillId}`
}

/**
 * The installed skills as files the drivers write with the plugin's own
 * rendered files: `<skillsDir>/<id>/SKILL.md`, rewritten at every start.
 */
export function renderedSkillFiles(
  plugin: FrameworkPlugin,
  skills: AgentSkillFile[] | undefined
): RenderedFile[] {
  if (!plugin.skillsDir || !skills?.length) return []
  const root = plugin.skillsDir.root
  return skills.map((skill) => ({
    root,
    path: `${skillFolder(plugin, skill.id)}/SKILL.md`,
    content: skill.content,
  }))
}
