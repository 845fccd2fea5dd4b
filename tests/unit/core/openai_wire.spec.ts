import { test } from '@japa/runner'
import {
  CompletionStreamError,
  completionChunks,
  emptyCompletion,
  openAiUsage,
  sseData,
  sseEvents,
} from '#core/openai/wire'

async function* chunks(...parts: (string | Uint8Array)[]) {
  for (const part of parts) yield part
}

async function collect<T>(source: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = []
  for await (const item of source) items.push(item)
  return items
}

async function readAll(body: AsyncIterable<Uint8Array | string>, model = 'asked') {
  const reader = completionChunks(sseData(body), emptyCompletion(model))
  const tokens: string[] = []
  let step = await reader.next()
  for (; !step.done; step = await reader.next()) if (step.value.token) tokens.push(step.value.token)
  return { tokens, reply: step.value }
}

const chunk = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`

test.group('OpenAI wire: SSE events', () => {
  test('events split across chunks, CRLF line ends, names, comments and a last unterminated event', async ({
    assert,
  }) => {
    const events = await collect(
      sseEvents(
        chunks('data: one\r\n', '\r\n: a comment\n\nevent: ping\ndata: a\ndata: b\n\ndata: tail')
      )
    )
    assert.deepEqual(events, [
      { event: null, data: 'one' },
      { event: 'ping', data: 'a\nb' },
      { event: null, data: 'tail' },
    ])
  })

  test('a CRLF split between two chunks is one line end', async ({ assert }) => {
    const events = await collect(sseEvents(chunks('data: a\r', '\ndata: b\r\n\r\n')))
    assert.deepEqual(events, [{ event: null, data: 'a\nb' }])
  })

  test('a character whose bytes arrive in two chunks stays whole', async ({ assert }) => {
    const bytes = new TextEncoder().encode('data: héllo 🙂\n\n')
    const cut = bytes.indexOf(0xf0) + 2 // inside the emoji's four bytes
    const events = await collect(sseEvents(chunks(bytes.slice(0, cut), bytes.slice(cut))))
    assert.deepEqual(events, [{ event: null, data: 'héllo 🙂' }])
  })
})

test.group('OpenAI wire: usage', () => {
  test('OpenAI and Anthropic names, rounding, and nothing usable', ({ assert }) => {
    assert.deepEqual(openAiUsage({ usage: { prompt_tokens: 9, completion_tokens: 2 } }), {
      inputTokens: 9,
      outputTokens: 2,
    })
    assert.deepEqual(openAiUsage({ usage: { input_tokens: 4.6, output_tokens: -1 } }), {
      inputTokens: 5,
      outputTokens: 0,
    })
    assert.isNull(openAiUsage({ usage: { prompt_tokens: 'x', completion_tokens: 1 } }))
    assert.isNull(openAiUsage({ choices: [] }))
  })
})

test.group('OpenAI wire: completion stream', () => {
  test('deltas in order, the model named, usage from the usage-only chunk, [DONE] seen', async ({
    assert,
  }) => {
    const { tokens, reply } = await readAll(
      chunks(
        chunk({ model: 'served', choices: [{ delta: { role: 'assistant' } }] }),
        chunk({ choices: [{ delta: { content: 'Hel' } }] }),
        'data: not json\n\n',
        chunk({ choices: [{ delta: { content: 'lo' } }] }),
        chunk({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 2 } }),
        'data: [DONE]\n\n',
        chunk({ choices: [{ delta: { content: 'after done' } }] })
      )
    )
    assert.deepEqual(tokens, ['Hel', 'lo'])
    assert.deepEqual(reply, {
      content: 'Hello',
      model: 'served',
      usage: { inputTokens: 3, outputTokens: 2 },
      done: true,
    })
  })

  test('a stream cut short says so; an error chunk throws its message', async ({ assert }) => {
    const { reply } = await readAll(chunks(chunk({ choices: [{ delta: { content: 'Hi' } }] })))
    assert.deepEqual(reply, { content: 'Hi', model: 'asked', usage: null, done: false })

    const failing = readAll(chunks(chunk({ error: { message: 'overloaded' } })))
    await assert.rejects(() => failing, CompletionStreamError)
    await failing.catch((error) => assert.equal(error.message, 'overloaded'))
  })

  test('each chunk as it was sent, the usage-only chunk marked; the reply is current when the reader stops early', async ({
    assert,
  }) => {
    const reply = emptyCompletion('asked')
    const payloads = [
      JSON.stringify({ choices: [{ delta: { content: 'one ' } }] }),
      JSON.stringify({ choices: [], usage: { prompt_tokens: 1, completion_tokens: 1 } }),
      JSON.stringify({ choices: [{ delta: { content: 'never read' } }] }),
    ]
    const seen = []
    for await (const item of completionChunks(
      chunks(...payloads) as AsyncIterable<string>,
      reply
    )) {
      seen.push(item)
      if (item.usageOnly) break
    }
    assert.deepEqual(
      seen.map(({ data, token, usageOnly }) => ({ data, token, usageOnly })),
      [
        { data: payloads[0], token: 'one ', usageOnly: false },
        { data: payloads[1], token: null, usageOnly: true },
      ]
    )
    assert.deepEqual(reply, {
      content: 'one ',
      model: 'asked',
      usage: { inputTokens: 1, outputTokens: 1 },
      done: false,
    })
  })
})
