import { test } from '@japa/runner'
import { ForbiddenException, ValidationException } from '#core/exceptions/api_exceptions'
import { resolveWorkspacePath } from '#runtime/files/workspace_path'

const options = {
  workspaceAliases: ['/srv/storage/agents/a1/workspace', '/home/node/.openclaw/workspace'],
  outsidePrefixes: ['/srv/storage'],
}

test.group('Runtime / workspace path resolution', () => {
  test('{input} is {display}')
    .with([
      { input: '/', display: '/' },
      { input: '', display: '/' },
      { input: undefined, display: '/' },
      { input: '.', display: '/' },
      { input: 'notes.txt', display: '/notes.txt' },
      { input: '/notes.txt', display: '/notes.txt' },
      { input: 'docs//a/./b.md', display: '/docs/a/b.md' },
      { input: 'docs/', display: '/docs' },
      { input: 'a%20b.txt', display: '/a%20b.txt' },
      { input: '..notes', display: '/..notes' },
      { input: 'etc/passwd', display: '/etc/passwd' },
      { input: '/srv/storage/agents/a1/workspace/x.txt', display: '/x.txt' },
      { input: '/srv/storage/agents/a1/workspace', display: '/' },
      { input: '/home/node/.openclaw/workspace/memory/a.md', display: '/memory/a.md' },
    ])
    .run(({ assert }, row) => {
      const resolved = resolveWorkspacePath(row.input, options)
      assert.equal(resolved.display, row.display)
      assert.equal(resolved.relative, row.display.slice(1))
    })

  test('refuses traversal case {$i} with 403')
    .with([
      { input: '..' },
      { input: '../secret' },
      { input: 'docs/../../secret' },
      { input: 'docs/..' },
      { input: '/../etc/passwd' },
      { input: '..\\..\\windows' },
      { input: 'a\\..\\..\\b' },
      { input: '.. ' },
      { input: '.../..' },
      { input: '/etc/passwd' },
      { input: '/proc/self/environ' },
      { input: '/root/.ssh/id_rsa' },
      { input: '/tmp/x' },
      { input: '/srv/storage/agents/a1/state/openclaw.json' },
      { input: '/srv/storage/agents/other/workspace/x' },
      { input: '/srv/storage/agents/a1/workspace/../state/x' },
      { input: 'notes\u0000.txt' },
      { input: 'notes.txt\u0000' },
      { input: 'line\u000abreak' },
      { input: '%2e%2e/secret' },
      { input: '%2E%2E%2Fsecret' },
      { input: '..%2fsecret' },
      { input: 'docs%2f..%2f..%2fsecret' },
      { input: '%2e%2e%5csecret' },
      { input: 'notes%00.txt' },
      { input: '%252e%252e%252fsecret' },
      { input: '%25252e%25252e' },
      { input: '%c0%ae%c0%ae/secret' },
      { input: '%e0%80%ae%e0%80%ae/secret' },
    ])
    .run(({ assert }, row) => {
      assert.throws(() => resolveWorkspacePath(row.input, options))
      try {
        resolveWorkspacePath(row.input, options)
      } catch (error) {
        assert.instanceOf(error, ForbiddenException)
        assert.equal((error as ForbiddenException).status, 403)
        assert.equal((error as ForbiddenException).apiCode, 'FORBIDDEN')
      }
    })

  test('a non-string or oversized path is a validation error', ({ assert }) => {
    assert.throws(() => resolveWorkspacePath(42), 'path must be a string')
    assert.throws(() => resolveWorkspacePath('a'.repeat(5000)))
    try {
      resolveWorkspacePath(`${'b'.repeat(300)}/x`)
      assert.fail('a 300-character segment must be refused')
    } catch (error) {
      assert.instanceOf(error, ValidationException)
    }
  })
})
