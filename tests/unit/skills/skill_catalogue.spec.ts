import { test } from '@japa/runner'
import { parseSkill } from '#skills/services/skill_catalogue'
import { renderedSkillFiles } from '#runtime/skill_files'
import type { FrameworkPlugin } from '#plugins/types'

const VALID = `---
name: demo-skill
description: Does one clear thing, described in a line.
metadata:
  title: Demo skill
  frameworks: openclaw, hermes
---

# Demo
`

test.group('Skills catalogue: SKILL.md rules', () => {
  test('reads id, title, description and frameworks from the front matter', ({ assert }) => {
    const skill = parseSkill('demo-skill', VALID)
    assert.equal(skill.name, 'Demo skill')
    assert.equal(skill.description, 'Does one clear thing, described in a line.')
    assert.deepEqual(skill.frameworks, ['openclaw', 'hermes'])
    assert.equal(skill.content, VALID)
  })

  test('refuses files that break the AgentSkills or catalogue rules, naming the file', ({
    assert,
  }) => {
    assert.throws(
      () => parseSkill('Demo_Skill', VALID),
      /skills\/Demo_Skill\/SKILL.md: the folder name/
    )
    assert.throws(() => parseSkill('demo-skill', '# no front matter'), /no YAML front matter/)
    assert.throws(() => parseSkill('other-name', VALID), /`name` must equal the folder name/)
    assert.throws(
      () => parseSkill('demo-skill', VALID.replace(/description: .*\n/, '')),
      /description/
    )
    assert.throws(
      () => parseSkill('demo-skill', VALID.replace('  frameworks: openclaw, hermes\n', '')),
      /frameworks/
    )
  })

  test('skills render into the plugin skills folder, under its root', ({ assert }) => {
    const plugin = {
      name: 'demo',
      skillsDir: { root: 'state', path: 'skills', reload: 'watch' },
    } as unknown as FrameworkPlugin
    assert.deepEqual(renderedSkillFiles(plugin, [{ id: 'demo-skill', content: 'x' }]), [
      { root: 'state', path: 'skills/demo-skill/SKILL.md', content: 'x' },
    ])
    assert.deepEqual(
      renderedSkillFiles({ name: 'none' } as FrameworkPlugin, [{ id: 'a', content: 'x' }]),
      []
    )
    assert.throws(
      () => renderedSkillFiles(plugin, [{ id: '../escape', content: 'x' }]),
      /Invalid skill id/
    )
  })
})
