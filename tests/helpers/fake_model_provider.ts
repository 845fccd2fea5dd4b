import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface RecordedModelRequest {
  method: string
  path: string
  headers: IncomingHttpHeaders
  body: any
  rawLength: number
}

export interface FakeModelProvider {
  /** `http://127.0.0.1:<port>/v1` */
  baseUrl: string
  requests: RecordedModelRequest[]
  close(): Promise<void>
}

/**
 * A stand-in for an OpenAI-compatible model provider on 127.0.0.1 (or `host`): answers
 * POST /v1/chat/completions (streamed as SSE chunks when `stream` is true,
 * with a usage chunk when asked) and GET /v1/models, and records every
 * request. Frameworks such as OpenClaw always stream and send large
 * prompts, so bodies of any size are read.
 */
export async function startFakeModelProvider(
  options: { reply?: string; model?: string; host?: string } = {}
): Promise<FakeModelProvider> {
  const reply = options.reply ?? 'Hello from the stand-in model.'
  const model = options.model ?? 'stand-in-model'
  const requests: RecordedModelRequest[] = []

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8')
      let body: any
      try {
        body = raw ? JSON.parse(raw) : undefined
      } catch {
        body = raw
      }
      const path = (req.url ?? '/').split('?')[0]
      requests.push({
        method: req.method ?? 'GET',
        path,
        headers: req.headers,
        body,
        rawLength: raw.length,
      })

      if (req.method === 'GET' && path.endsWith('/models')) {
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(
          JSON.stringify({
            object: 'list',
            data: [{ id: model, object: 'model', owned_by: 'test' }],
          })
        )
        return
      }
      if (req.method !== 'POST' || !path.endsWith('/chat/completions')) {
        res.writeHead(404, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ error: { message: 'not found' } }))
        return
      }
      const id = `chatcmpl-stand-in-${requests.length}`
      const created = Math.floor(Date.now() / 1000)
      const usage = {
        prompt_tokens: Math.ceil(raw.length / 4),
        completion_tokens: 7,
        total_tokens: Math.ceil(raw.length / 4) + 7,
      }
      if (!body?.stream) {
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(
          JSON.stringify({
            id,
            object: 'chat.completion',
            created,
            model,
            choices: [
              { index: 0, message: { role: 'assistant', content: reply }, finish_reason: 'stop' },
            ],
            usage,
          })
        )
        return
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
      const send = (payload: unknown) => res.write(`data: ${JSON.stringify(payload)}\n\n`)
      const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
        send({
          id,
          object: 'chat.completion.chunk',
          created,
          model,
          choices: [{ index: 0, delta, finish_reason: finish }],
        })
      chunk({ role: 'assistant', content: '' })
      for (const piece of reply.split(/(?<= )/)) chunk({ content: piece })
      chunk({}, 'stop')
      if (body.stream_options?.include_usage) {
        send({ id, object: 'chat.completion.chunk', created, model, choices: [], usage })
      }
      res.end('data: [DONE]\n\n')
    })
  })

  await new Promise<void>((resolve) => server.listen(0, options.host ?? '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
