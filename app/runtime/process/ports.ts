import { createServer } from 'node:net'

/** True when nothing listens on 127.0.0.1:port (and we may bind it). */
export function isPortFree(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(true)))
  })
}

function ephemeralPort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen({ port: 0, host, exclusive: true }, () => {
      const address = server.address()
      server.close(() =>
        typeof address === 'object' && address
          ? resolve(address.port)
          : reject(new Error('no port'))
      )
    })
  })
}

/** The ports agents other than `except` hold. */
export function portsTakenBy(agents: Map<string, { port?: number }>, except: string): Set<number> {
  const ports = new Set<number>()
  for (const [agentId, agent] of agents) {
    if (agentId !== except && agent.port) ports.add(agent.port)
  }
  return ports
}

/**
 * A free loopback port for one agent: its previous port when still free (a
 * restarted agent keeps its address), else one the kernel hands out,
 * skipping ports other agents hold.
 */
export async function allocatePort(options: { preferred?: number; taken?: Set<number> } = {}) {
  const taken = options.taken ?? new Set<number>()
  if (options.preferred && !taken.has(options.preferred) && (await isPortFree(options.preferred))) {
    return options.preferred
  }
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = await ephemeralPort('127.0.0.1')
    if (!taken.has(port)) return port
  }
  throw new Error('No free port for the agent')
}
