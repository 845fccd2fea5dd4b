/**
 * A Redis server of a test's own (Debian's redis-server, nothing kept on
 * disk, on a free port) that the test may stop and start at will: fault
 * tests never touch the machine's shared Redis.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { Redis } from 'ioredis'
import { freePort, waitFor } from '#tests/helpers/processes'

export interface ThrowawayRedis {
  url: string
  /** A client of its own for looking inside (keys the service wrote). */
  keys(pattern: string): Promise<string[]>
  stop(): Promise<void>
  start(): Promise<void>
  destroy(): Promise<void>
}

export async function startThrowawayRedis(): Promise<ThrowawayRedis> {
  const port = await freePort()
  let server: ChildProcess | undefined
  const start = async () => {
    server = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { stdio: 'ignore' }
    )
    await waitFor(
      async () => {
        const probe = new Redis({ port, lazyConnect: true, retryStrategy: () => null })
        probe.on('error', () => {})
        try {
          await probe.connect()
          return (await probe.ping()) === 'PONG' ? true : undefined
        } catch {
          return undefined
        } finally {
          probe.disconnect()
        }
      },
      { timeoutMs: 10_000, what: `redis-server on port ${port}` }
    )
  }
  const stop = async () => {
    if (!server || server.exitCode !== null) return
    const exited = once(server, 'exit')
    server.kill('SIGKILL')
    await exited
  }
  await start()
  return {
    url: `redis://127.0.0.1:${port}`,
    async keys(pattern) {
      const client = new Redis({ port, retryStrategy: () => null })
      client.on('error', () => {})
      try {
        return await client.keys(pattern)
      } finally {
        client.disconnect()
      }
    },
    stop,
    start,
    destroy: stop,
  }
}
