import { execFile } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { existsSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http'
import { createServer, type AddressInfo, type Server } from 'node:net'
import { networkInterfaces } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { test } from '@japa/runner'
import { agentPaths } from '#runtime/agent_paths'
import { gatewayTokenFor } from '#runtime/credentials'
import {
  BRIDGE,
  agentNetworkUnavailable,
  netnsName,
} from '#runtime/process/agent_network/agent_networks'
import { dial, PRIVATE_LAN, startPrivateLan } from '#tests/helpers/private_lan'
import { fixtureSpec, processHarness, type RuntimeHarness } from '#tests/helpers/runtime'

const unavailable = agentNetworkUnavailable()
const ipCommand = (...args: string[]) => promisify(execFile)('ip', args)

/** The same dial, from inside the agent: a script run by its own shell. */
const PROBE = `
const net = require('node:net')
const targets = JSON.parse(process.argv[2])
Promise.all(targets.map(([host, port]) => new Promise((resolve) => {
  const socket = net.connect(port, host)
  socket.setTimeout(3000, () => { socket.destroy(); resolve('timeout') })
  socket.once('connect', () => { socket.destroy(); resolve('connected') })
  socket.once('error', (error) => resolve(error.code))
}))).then((results) => console.log(JSON.stringify(results)))
`

/** The host's first IPv4 address off loopback and off the agents' bridge. */
function hostAddress(): string | undefined {
  for (const [name, addresses] of Object.entries(networkInterfaces())) {
    if (name === 'lo' || name === BRIDGE || name === PRIVATE_LAN.veth) continue
    const found = addresses?.find((entry) => entry.family === 'IPv4' && !entry.internal)
    if (found) return found.address
  }
  return undefined
}

async function listen(server: Server | HttpServer, host: string): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, host, resolve))
  return (server.address() as AddressInfo).port
}

test.group('Agent network: a namespace per agent (process driver)', (group) => {
  let harness: RuntimeHarness
  const closers: Array<() => unknown> = []
  group.each.setup(async () => {
    harness = await processHarness()
    return async () => {
      await harness.cleanup()
      for (const close of closers.splice(0).reverse()) await close()
    }
  })

  async function shell(agentId: string, cmd: string) {
    const info = await harness.runtime.status(agentId)
    const token = await gatewayTokenFor(agentPaths(harness.agentsDir, agentId).credentialsFile)
    const response = await fetch(`${info.baseUrl}/shell?cmd=${encodeURIComponent(cmd)}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    })
    return (await response.json()) as { code: number; stdout: string; stderr: string }
  }

  /** Dials every target from the agent's own shell. */
  async function dialFromAgent(agentId: string, targets: Array<[string, number]>) {
    const script = join(agentPaths(harness.agentsDir, agentId).workspace, 'probe.cjs')
    await writeFile(script, PROBE, { mode: 0o644 })
    const result = await shell(agentId, `node probe.cjs '${JSON.stringify(targets)}'`)
    if (result.code !== 0) throw new Error(`probe failed: ${result.stderr}`)
    return JSON.parse(result.stdout) as string[]
  }

  test(
    "from the agent's shell only the model proxy answers: not the host's loopback services, its own addresses, a private range or another agent"
  )
    .skip(unavailable !== undefined, `agent namespaces need ${unavailable}`)
    .timeout(120_000)
    .run(async ({ assert }) => {
      // The service's model proxy, on the host's loopback as the service itself is.
      const proxied: string[] = []
      const modelProxy = createHttpServer((request, response) => {
        proxied.push(`${request.method} ${request.url}`)
        response.writeHead(200, { 'content-type': 'application/json' })
        response.end(
          JSON.stringify({ choices: [{ message: { role: 'assistant', content: 'hi' } }] })
        )
      })
      const proxyPort = await listen(modelProxy, '127.0.0.1')
      closers.push(() => modelProxy.close())
      // A service of the host on every interface (its own addresses).
      const hostService = createServer((socket) => {
        socket.on('error', () => undefined)
        socket.end('leaked\n')
      })
      const hostPort = await listen(hostService, '0.0.0.0')
      closers.push(() => hostService.close())
      closers.push(await startPrivateLan())

      const mine = randomUUID()
      const theirs = randomUUID()
      const spec = fixtureSpec(mine)
      spec.modelProxy.baseUrl = `http://127.0.0.1:${proxyPort}/v1`
      await harness.runtime.ensureStarted(spec, { waitReady: true })
      await harness.runtime.ensureStarted(fixtureSpec(theirs), { waitReady: true })
      const myInfo = await harness.runtime.status(mine)
      const theirInfo = await harness.runtime.status(theirs)
      const myGateway = new URL(myInfo.baseUrl!)
      const theirGateway = new URL(theirInfo.baseUrl!)
      const bridge = networkInterfaces()[BRIDGE]!.find((entry) => entry.family === 'IPv4')!.address
      const ownAddress = hostAddress()

      const targets: Array<[string, string, number]> = [
        ['PostgreSQL on the host loopback', '127.0.0.1', 5432],
        ['Redis on the host loopback', '127.0.0.1', 6379],
        ["the service's port", '127.0.0.1', Number(process.env.PORT)],
        ["another agent's gateway", theirGateway.hostname, Number(theirGateway.port)],
        ['a host service on the agents bridge address', bridge, hostPort],
        ['a private-range address of this machine', PRIVATE_LAN.peer, PRIVATE_LAN.port],
        ...(ownAddress
          ? ([["a host service on the host's own address", ownAddress, hostPort]] as Array<
              [string, string, number]
            >)
          : []),
      ]
      // Each target is there: the host reaches it.
      for (const [what, host, port] of targets) {
        assert.equal(await dial(host, port), 'connected', `${what} answers the host`)
      }
      const fromAgent = await dialFromAgent(
        mine,
        targets.map(([, host, port]): [string, number] => [host, port])
      )
      targets.forEach(([what, host, port], index) => {
        // Dropped (timeout) or refused, never answered.
        assert.oneOf(
          fromAgent[index],
          ['timeout', 'ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH'],
          `${what} (${host}:${port}) from the agent`
        )
      })

      // The gateway is no host port another tenant could dial: the service reaches it in the namespace.
      assert.notEqual(myGateway.hostname, '127.0.0.1')
      assert.notEqual(await dial('127.0.0.1', Number(myGateway.port)), 'connected')
      const reply = await harness.runtime.chat(mine, {
        conversationId: 'net',
        messages: [{ role: 'user', content: 'hello' }],
      })
      assert.isString(reply.content)

      // The model proxy answers the agent (through the relay on the bridge, its routes only).
      const model = await shell(
        mine,
        `node -e 'const url = process.env.FIXTURE_MODEL_URL; Promise.all([
          fetch(url + "/chat/completions", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" }).then((r) => r.json()),
          fetch(url.slice(0, -3) + "/health").then((r) => r.status),
        ]).then((out) => console.log(JSON.stringify([url, ...out])))'`
      )
      const [url, chat, other] = JSON.parse(model.stdout || '[]') as [string, any, number]
      assert.equal(new URL(url).hostname, bridge, model.stderr)
      assert.equal(chat?.choices?.[0]?.message?.content, 'hi', 'a chat answered through the proxy')
      assert.include(proxied, 'POST /v1/chat/completions')
      assert.equal(other, 404, 'nothing but the model proxy through the relay')
    })

  test(
    'an agent has its own namespace while it runs; a stop or delete removes it, a start makes it again'
  )
    .skip(unavailable !== undefined, `agent namespaces need ${unavailable}`)
    .timeout(60_000)
    .run(async ({ assert }) => {
      const agentId = randomUUID()
      const netns = `/run/netns/${netnsName(agentId)}`
      await harness.runtime.ensureStarted(fixtureSpec(agentId), { waitReady: true })
      assert.isTrue(existsSync(netns))
      const inside = await shell(agentId, 'cat /proc/net/dev')
      assert.match(inside.stdout, /eth0:/)
      assert.notMatch(inside.stdout, new RegExp(`${BRIDGE}|docker0`), "not the host's interfaces")

      await harness.runtime.stop(agentId)
      assert.isFalse(existsSync(netns), 'gone with the stop')
      await harness.runtime.ensureStarted(fixtureSpec(agentId), { waitReady: true })
      assert.isTrue(existsSync(netns), 'made again by the start')
      const again = await shell(agentId, 'echo ok')
      assert.equal(again.stdout.trim(), 'ok')

      await harness.runtime.remove(agentId)
      assert.isFalse(existsSync(netns), 'gone with the delete')
    })

  test(
    'a namespace the service was killed while making is made again before the agent starts in it'
  )
    .skip(unavailable !== undefined, `agent namespaces need ${unavailable}`)
    .timeout(60_000)
    .run(async ({ assert }) => {
      const agentId = randomUUID()
      const name = netnsName(agentId)
      // What a kill -9 between `ip addr add` and `ip link set lo up` leaves: the namespace, its
      // link and its address, but loopback, links, route and rules not yet set.
      await ipCommand('netns', 'add', name)
      closers.push(() => ipCommand('netns', 'del', name).catch(() => undefined))
      await ipCommand(
        'link',
        'add',
        `ahx${agentId.slice(0, 8)}`,
        'type',
        'veth',
        'peer',
        'name',
        'eth0',
        'netns',
        name
      )
      await ipCommand('-n', name, 'addr', 'add', '10.213.254.250/16', 'dev', 'eth0')

      await harness.runtime.ensureStarted(fixtureSpec(agentId), { waitReady: true })
      const again = await shell(agentId, 'echo ok')
      assert.equal(again.stdout.trim(), 'ok', 'reached in its namespace')
      const { stdout } = await ipCommand('-n', name, '-j', 'link', 'show', 'lo')
      assert.include(JSON.parse(stdout)[0].flags, 'UP', 'its loopback is up')
      await harness.runtime.remove(agentId)
    })
})
