import http from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { test } from '@japa/runner'
import { upstreamRequest } from '#core/openai/upstream_http'

/**
 * A kept-alive connection its server no longer has: what an agent restored
 * from its checkpoint does to the connections it had (CRIU closes them
 * silently, then resets whatever arrives on them).
 */
test.group('Upstream HTTP: kept-alive connections the server forgot', (group) => {
  let server: http.Server
  let url: string
  let sockets: Set<Socket>
  let forgotten: Set<Socket>
  let resets: number
  let answered: number
  group.each.setup(async () => {
    sockets = new Set()
    forgotten = new Set()
    resets = 0
    answered = 0
    server = http.createServer((request, response) => {
      if (forgotten.has(request.socket)) {
        resets++
        request.socket.resetAndDestroy()
        return
      }
      answered++
      response.setHeader('content-type', 'application/json')
      response.end(JSON.stringify({ answer: answered }))
    })
    server.on('connection', (socket) => sockets.add(socket))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/chat/completions`
    return () => {
      server.closeAllConnections()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    }
  })

  test('a request on a kept-alive connection reset before any answer is sent again on a new one', async ({
    assert,
  }) => {
    const first = await upstreamRequest(url, { body: { n: 1 }, timeoutMs: 5000 })
    assert.deepEqual(await first.json(), { answer: 1 })
    assert.equal(sockets.size, 1, 'one kept-alive connection')
    // Every connection open now is forgotten, as a restore does.
    for (const socket of sockets) forgotten.add(socket)

    const second = await upstreamRequest(url, { body: { n: 2 }, timeoutMs: 5000 })
    assert.deepEqual(await second.json(), { answer: 2 })
    assert.equal(resets, 1, 'the stale connection was tried once, and reset')
    assert.equal(sockets.size, 2, 'then a new connection')
  })

  test('a reset on a new connection is not asked again', async ({ assert }) => {
    // Every connection is forgotten from its first byte: there is nothing to retry on.
    server.on('connection', (socket) => forgotten.add(socket))
    await assert.rejects(
      () => upstreamRequest(url, { body: { n: 1 }, timeoutMs: 5000 }),
      /unreachable: read ECONNRESET/
    )
    assert.equal(resets, 1)
  })
})
