import { mkdir, symlink } from 'node:fs/promises'
import { join } from 'node:path'

/**
 * Every path form that must never reach outside an agent's workspace:
 * `..` in all spellings, absolute paths, NUL bytes, percent-encoded and
 * double-encoded variants, overlong UTF-8 dots, and the escape links planted
 * by plantEscapeLinks() (pointing at a folder, a file and nothing).
 */
export const TRAVERSAL_PATHS = [
  '..',
  '../state/fixture.json',
  '../../',
  'docs/../../state/fixture.json',
  '/../state/fixture.json',
  '..\\state\\fixture.json',
  '/etc/passwd',
  '/proc/self/environ',
  'notes\u0000.txt',
  '%2e%2e/state/fixture.json',
  '%2e%2e%2fstate%2ffixture.json',
  '..%2fstate',
  '%252e%252e%252fstate',
  '%c0%ae%c0%ae/state',
  'outside-dir/passwd',
  'outside-dir',
  'outside-file',
  'dangling',
  'dangling/new.txt',
  'nested/escape/fixture.json',
]

/**
 * Plants the symlinks an agent (or a user through it) could create in its
 * own workspace, each pointing outside it.
 */
export async function plantEscapeLinks(folders: { workspace: string; state: string }, tag: string) {
  await symlink('/etc', join(folders.workspace, 'outside-dir'))
  await symlink(join(folders.state, 'fixture.json'), join(folders.workspace, 'outside-file'))
  await symlink(`/tmp/agent-host-nowhere-${tag}`, join(folders.workspace, 'dangling'))
  await mkdir(join(folders.workspace, 'nested'))
  await symlink(folders.state, join(folders.workspace, 'nested', 'escape'))
}
