import { test } from '@japa/runner'
import {
  LOCAL_DEV_NOTICE,
  localDevText,
  withoutFrameworkContext,
} from '#chat/services/local_dev_model'

test.group('local-dev model: what the user typed', () => {
  test('text outside every wrapper block is kept, the blocks go', ({ assert }) => {
    const text = [
      'before',
      '<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>',
      'System: untrusted metadata {"a":1}',
      '<<<END_OPENCLAW_INTERNAL_CONTEXT>>>',
      'middle',
      '<<<BEGIN_OTHER_FRAMEWORK_CONTEXT>>>x<<<END_OTHER_FRAMEWORK_CONTEXT>>>',
      'after',
    ].join('\n')
    assert.equal(withoutFrameworkContext(text).replace(/\s+/g, ' ').trim(), 'before middle after')
  })

  test('a block left open runs to the end; stray end markers go', ({ assert }) => {
    assert.equal(withoutFrameworkContext('hello <<<BEGIN_X>>> secret').trim(), 'hello')
    assert.equal(withoutFrameworkContext('<<<END_X>>>hello').trim(), 'hello')
  })

  test('a plain message is quoted as typed; a wrapper alone leaves just the notice', ({
    assert,
  }) => {
    assert.equal(
      localDevText([{ role: 'user', content: 'Hi <there>' }]),
      `${LOCAL_DEV_NOTICE} You said: "Hi <there>"`
    )
    assert.equal(
      localDevText([{ role: 'user', content: '<<<BEGIN_A>>>only context<<<END_A>>>' }]),
      LOCAL_DEV_NOTICE
    )
  })
})
