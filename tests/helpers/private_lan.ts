import { execFile, spawn } from 'node:child_process'
import { connect } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'

const run = promisify(execFile)

/**
 * A private-range network of this machine only (never an address off it): a
 * network namespace behind a veth pair, the host side `192.168.251.1/30`, the
 * namespace side `192.168.251.2`, where socat answers one TCP port. The host
 * routes to it, as to a neighbour on its LAN. Needs root.
 */
export const PRIVATE_LAN = {
  name: 'ahtest-lan',
  veth: 'ahtestlan0',
  host: '192.168.251.1',
  peer: '192.168.251.2',
  port: 7341,
}

/** Outcome of a TCP connection: `connected`, an error code, or `timeout` (dropped). */
export function dial(host: string, port: number, timeoutMs = 3000): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, host)
    socket.setTimeout(timeoutMs, () => {
      socket.destroy()
      resolve('timeout')
    })
    socket.once('connect', () => {
      socket.destroy()
      resolve('connected')
    })
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'))
  })
}

/** Makes the private network and its listener; resolves with what removes them. */
export async function startPrivateLan(): Promise<() => Promise<void>> {
  const { name, veth, host, peer, port } = PRIVATE_LAN
  const remove = async () => {
    listener?.kill('SIGKILL')
    await run('ip', ['netns', 'del', name]).catch(() => undefined)
    await run('ip', ['link', 'del', veth]).catch(() => undefined)
  }
  let listener: ReturnType<typeof spawn> | undefined
  await remove()
  await run('ip', ['netns', 'add', name])
  await run('ip', ['link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', name])
  await run('ip', ['addr', 'add', `${host}/30`, 'dev', veth])
  await run('ip', ['link', 'set', veth, 'up'])
  await run('ip', ['-n', name, 'addr', 'add', `${peer}/30`, 'dev', 'eth0'])
  await run('ip', ['-n', name, 'link', 'set', 'eth0', 'up'])
  await run('ip', ['-n', name, 'link', 'set', 'lo', 'up'])
  await run('ip', ['-n', name, 'route', 'add', 'default', 'via', host])
  listener = spawn(
    'nsenter',
    [
      `--net=/run/netns/${name}`,
      'socat',
      `TCP-LISTEN:${port},bind=${peer},reuseaddr,fork`,
      'SYSTEM:echo lan',
    ],
    { stdio: 'ignore' }
  )
  for (let attempt = 0; attempt < 50 && (await dial(peer, port, 500)) !== 'connected'; attempt++) {
    await sleep(100)
  }
  return remove
}
