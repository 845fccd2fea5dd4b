import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { modelProxyConfig, type ModelRate } from '#config/model_proxy'
import { chatConfig } from '#config/chat'
import { baseUrl } from '#tests/helpers/http'
import { lateBound } from '#tests/helpers/late_bound'

/**
 * A stand-in model provider on 127.0.0.1 for the chat tests, speaking the
 * real wire formats: OpenAI chat completions (`POST /v1/chat/completions`,
 * whole or streamed as SSE chunks, with the usage chunk when
 * `stream_options.include_usage` asks for it), `GET /v1/models`, and
 * Anthropic's Messages API (`POST /v1/messages`, whole or with its own
 * stream events). Its behaviour can be changed per test; it records every
 * request and counts answers whose client went away before the end.
 */
export interface UpstreamBehaviour {
  /** The reply text (or made from the request body). */
  reply: string | ((body: any) => string)
  /** The `model` it answers with; default: the requested one. */
  model?: string
  /** Reported usage; default 10 prompt tokens and one completion token per word. `null` omits usage. */
  usage?: { prompt_tokens: number; completion_tokens: number } | null
  /** Pause before each streamed token. */
  tokenDelayMs: number
  /** Pause before a whole (non-streamed) answer. */
  replyDelayMs: number
  /** Answer this HTTP status with an error body instead. */
  status?: number
  /** Streaming: send an error event after this many tokens. */
  failAfterTokens?: number
  /** Streaming: destroy the connection (no end, no error event) after this many tokens. */
  cutAfterTokens?: number
  /** Streaming: fall silent (connection left open) after this many tokens. */
  stallAfterTokens?: number
  /**
   * OpenAI format: answer with this tool call instead of text when it
   * returns one (asked per request, so a second request can get text).
   */
  toolCall?: (body: any) => { name: string; arguments: Record<string, unknown> } | undefined
}

export interface RecordedUpstreamRequest {
  method: string
  path: string
  headers: IncomingHttpHeaders
  body: any
}

export interface ModelUpstream {
  /** `http://127.0.0.1:<port>/v1` */
  baseUrl: string
  requests: RecordedUpstreamRequest[]
  /** Streams whose client closed the connection before the stream ended. */
  closedEarly: number
  /** Requests being answered right now. */
  inFlight: number
  set(behaviour: Partial<UpstreamBehaviour>): void
  reset(): void
  close(): Promise<void>
}

const DEFAULTS: UpstreamBehaviour = {
  reply: 'Hello from the stand-in model.',
  tokenDelayMs: 0,
  replyDelayMs: 0,
}

function pieces(text: string): string[] {
  return text.split(/(?<= )/).filter(Boolean)
}

export async function startModelUpstream(
  initial: Partial<UpstreamBehaviour> = {}
): Promise<ModelUpstream> {
  let behaviour: UpstreamBehaviour = { ...DEFAULTS, ...initial }
  const requests: RecordedUpstreamRequest[] = []
  const state = { closedEarly: 0, inFlight: 0 }

  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const raw = Buffer.concat(chunks).toString('utf8')
    let body: any
    try {
      body = raw ? JSON.parse(raw) : undefined
    } catch {
      body = raw
    }
    const path = (req.url ?? '/').split('?')[0]
    requests.push({ method: req.method ?? 'GET', path, headers: req.headers, body })
    const current = behaviour
    state.inFlight++
    let ended = false
    res.on('close', () => {
      state.inFlight--
      if (!ended && !res.writableFinished) state.closedEarly++
    })
    const finish = (text?: string) => {
      ended = true
      res.end(text)
    }

    if (req.method === 'GET' && path === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' })
      return finish(
        JSON.stringify({
          object: 'list',
          data: [{ id: current.model ?? 'stand-in-model', object: 'model', owned_by: 'test' }],
        })
      )
    }
    const anthropic = req.method === 'POST' && path === '/v1/messages'
    if (!anthropic && !(req.method === 'POST' && path === '/v1/chat/completions')) {
      res.writeHead(404, { 'content-type': 'application/json' })
      return finish(JSON.stringify({ error: { message: 'not found' } }))
    }
    if (current.status) {
      res.writeHead(current.status, { 'content-type': 'application/json' })
      return finish(
        JSON.stringify(
          anthropic
            ? { type: 'error', error: { type: 'api_error', message: `stand-in ${current.status}` } }
            : { error: { message: `stand-in ${current.status}`, type: 'api_error' } }
        )
      )
    }

    const text = typeof current.reply === 'function' ? current.reply(body) : current.reply
    const model = current.model ?? body?.model ?? 'stand-in-model'
    const usage =
      current.usage === null
        ? null
        : (current.usage ?? { prompt_tokens: 10, completion_tokens: pieces(text).length })
    const wireUsage = usage && {
      ...usage,
      total_tokens: usage.prompt_tokens + usage.completion_tokens,
    }

    const toolCall = anthropic ? undefined : current.toolCall?.(body)
    const wireToolCall = toolCall && {
      id: `call_stand_in_${requests.length}`,
      type: 'function',
      function: { name: toolCall.name, arguments: JSON.stringify(toolCall.arguments) },
    }

    if (!body?.stream) {
      await sleep(current.replyDelayMs)
      if (res.destroyed) return
      res.writeHead(200, { 'content-type': 'application/json' })
      if (anthropic) {
        return finish(
          JSON.stringify({
            id: 'msg_stand_in',
            type: 'message',
            role: 'assistant',
            model,
            content: [{ type: 'text', text }],
            stop_reason: 'end_turn',
            usage: usage && {
              input_tokens: usage.prompt_tokens,
              output_tokens: usage.completion_tokens,
            },
          })
        )
      }
      return finish(
        JSON.stringify({
          id: `chatcmpl-stand-in-${requests.length}`,
          object: 'chat.completion',
          created: Math.floor(Date.now() / 1000),
          model,
          choices: [
            wireToolCall
              ? {
                  index: 0,
                  message: { role: 'assistant', content: null, tool_calls: [wireToolCall] },
                  finish_reason: 'tool_calls',
                }
              : { index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' },
          ],
          ...(wireUsage ? { usage: wireUsage } : {}),
        })
      )
    }

    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    const write = (payload: unknown, event?: string) =>
      !res.destroyed &&
      res.write(`${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(payload)}\n\n`)

    if (anthropic) {
      write(
        {
          type: 'message_start',
          message: {
            id: 'msg_stand_in',
            type: 'message',
            role: 'assistant',
            model,
            content: [],
            usage: { input_tokens: usage?.prompt_tokens ?? 0, output_tokens: 1 },
          },
        },
        'message_start'
      )
      write(
        { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
        'content_block_start'
      )
      write({ type: 'ping' }, 'ping')
      let sent = 0
      for (const piece of pieces(text)) {
        if (current.failAfterTokens !== undefined && sent >= current.failAfterTokens) {
          write(
            { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } },
            'error'
          )
          return finish()
        }
        await sleep(current.tokenDelayMs)
        if (res.destroyed) return
        write(
          { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: piece } },
          'content_block_delta'
        )
        sent++
      }
      write({ type: 'content_block_stop', index: 0 }, 'content_block_stop')
      write(
        {
          type: 'message_delta',
          delta: { stop_reason: 'end_turn', stop_sequence: null },
          usage: { output_tokens: usage?.completion_tokens ?? 0 },
        },
        'message_delta'
      )
      write({ type: 'message_stop' }, 'message_stop')
      return finish()
    }

    const id = `chatcmpl-stand-in-${requests.length}`
    const created = Math.floor(Date.now() / 1000)
    const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) =>
      write({
        id,
        object: 'chat.completion.chunk',
        created,
        model,
        choices: [{ index: 0, delta, finish_reason: finishReason }],
      })
    if (wireToolCall) {
      chunk({ role: 'assistant', content: null, tool_calls: [{ index: 0, ...wireToolCall }] })
      chunk({}, 'tool_calls')
      if (body.stream_options?.include_usage && wireUsage) {
        write({
          id,
          object: 'chat.completion.chunk',
          created,
          model,
          choices: [],
          usage: wireUsage,
        })
      }
      return finish('data: [DONE]\n\n')
    }
    chunk({ role: 'assistant', content: '' })
    let sent = 0
    for (const piece of pieces(text)) {
      if (current.failAfterTokens !== undefined && sent >= current.failAfterTokens) {
        write({ error: { message: 'stand-in failure mid-stream', type: 'server_error' } })
        return finish()
      }
      if (current.cutAfterTokens !== undefined && sent >= current.cutAfterTokens) {
        // Let what was written reach the client, then reset the connection.
        await sleep(50)
        return res.socket?.resetAndDestroy()
      }
      if (current.stallAfterTokens !== undefined && sent >= current.stallAfterTokens) return
      await sleep(current.tokenDelayMs)
      if (res.destroyed) return
      chunk({ content: piece })
      sent++
    }
    chunk({}, 'stop')
    if (body.stream_options?.include_usage && wireUsage) {
      write({ id, object: 'chat.completion.chunk', created, model, choices: [], usage: wireUsage })
    }
    finish('data: [DONE]\n\n')
  })

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    get closedEarly() {
      return state.closedEarly
    },
    get inFlight() {
      return state.inFlight
    },
    set(changes) {
      behaviour = { ...behaviour, ...changes }
    },
    reset() {
      behaviour = { ...DEFAULTS, ...initial }
      requests.length = 0
      state.closedEarly = 0
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/**
 * Points the hosted model proxy at the stand-in (as MODEL_API_URL,
 * MODEL_API_KEY and MODEL_NAME would) and adds rates for test models;
 * returns a function that restores the previous settings.
 */
export function useUpstream(
  upstream: ModelUpstream,
  options: { apiKey?: string; defaultModel?: string; rates?: Record<string, ModelRate> } = {}
): () => void {
  const previous = { ...modelProxyConfig.upstream }
  const previousRates = { ...modelProxyConfig.rates }
  modelProxyConfig.upstream.url = upstream.baseUrl
  modelProxyConfig.upstream.apiKey = options.apiKey ?? 'upstream-secret-key'
  modelProxyConfig.upstream.defaultModel = options.defaultModel ?? 'stand-in-model'
  Object.assign(modelProxyConfig.rates, options.rates ?? {})
  return () => {
    Object.assign(modelProxyConfig.upstream, previous)
    for (const key of Object.keys(modelProxyConfig.rates)) delete modelProxyConfig.rates[key]
    Object.assign(modelProxyConfig.rates, previousRates)
  }
}

/** The part of a Japa group that `upstreamForGroup` hooks into. */
interface GroupHooks {
  setup(handler: () => Promise<() => Promise<void>>): unknown
  each: { setup(handler: () => void): unknown }
}

/**
 * One stand-in upstream for a test group: the model proxy points at it
 * (`useUpstream`'s options) while the group runs, and its behaviour is reset
 * before each test. What it returns stands for that upstream once the group has set up.
 */
export function upstreamForGroup(
  group: GroupHooks,
  options: Parameters<typeof useUpstream>[1] = {}
): ModelUpstream {
  let upstream: ModelUpstream | undefined
  group.setup(async () => {
    const started = await startModelUpstream()
    upstream = started
    const restore = useUpstream(started, options)
    return async () => {
      restore()
      await started.close()
    }
  })
  group.each.setup(() => upstream?.reset())
  return lateBound(() => upstream, 'the group has not set up its upstream yet')
}

/** `POST /v1/chat/completions` on the test server, with an agent's proxy token or a user's key. */
export function proxyCompletions(token: string, body: unknown) {
  return fetch(`${baseUrl()}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'authorization': `Bearer ${token}` },
    body: JSON.stringify(body),
  })
}

/** Points the customer-key providers (OpenAI, OpenRouter, Anthropic) at the stand-in. */
export function useProviderEndpoints(upstream: ModelUpstream): () => void {
  const previous = { ...chatConfig.providerEndpoints }
  chatConfig.providerEndpoints.openai = upstream.baseUrl
  chatConfig.providerEndpoints.openrouter = upstream.baseUrl
  chatConfig.providerEndpoints.anthropic = upstream.baseUrl
  return () => Object.assign(chatConfig.providerEndpoints, previous)
}

/** Reads an SSE answer with a real streaming client (fetch), event by event. */
export async function readSse(
  response: Response,
  onEvent?: (data: string, index: number) => void | 'stop'
): Promise<{ events: string[]; comments: string[] }> {
  const events: string[] = []
  const comments: string[] = []
  const decoder = new TextDecoder()
  let buffer = ''
  const reader = response.body!.getReader()
  for (;;) {
    const { value, done } = await reader.read()
    if (done) break
    buffer += decoder.decode(value, { stream: true })
    let boundary: number
    while ((boundary = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, boundary)
      buffer = buffer.slice(boundary + 2)
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) comments.push(line.slice(1).trim())
      }
      const data = block
        .split('\n')
        .filter((line) => line.startsWith('data: '))
        .map((line) => line.slice(6))
        .join('\n')
      if (!data) continue
      events.push(data)
      if (onEvent?.(data, events.length - 1) === 'stop') {
        await reader.cancel()
        return { events, comments }
      }
    }
  }
  return { events, comments }
}
