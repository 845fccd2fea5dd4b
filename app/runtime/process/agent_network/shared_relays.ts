import { mkdir, readdir, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { startModelProxyRelay, type ModelProxyRelay } from '#runtime/model_proxy_relay'

/**
 * The model proxy relays of the instances of one service on this host
 * (docs/runtime.md "Many machines"). An agent keeps the relay address it
 * was started with for as long as it runs, and another instance may adopt
 * it when the one that started it dies: so each instance's own relay port
 * is recorded (an empty file `<dir>/<port>` on the service's storage: this
 * service's instances, not every service on the host), and every instance
 * serves the recorded ports it can bind, each relay forwarding to its own
 * instance. Instances with the same port (one APP_URL, as a process
 * manager's cluster mode runs them) share it (SO_REUSEPORT); another
 * instance's port is bound only once that instance is gone, and alone, so
 * no other service starting later on that port number shares it.
 */
export class SharedRelays {
  readonly #relays = new Map<number, Promise<ModelProxyRelay | undefined>>()
  #own?: Promise<number>
  /** Recorded ports that could not be bound (their instance lives): said once each. */
  readonly #said = new Set<number>()

  constructor(
    private readonly options: {
      host: string
      /** `<storage>/runtime/relays`; without it, relays are this instance's only. */
      dir?: string
      /** Opens the port to agents (the host's firewall set). */
      open: (port: number) => Promise<void>
      /** The model a bearer token's calls are answered with by the relay itself (template warm-ups). */
      answersHere?: (authorization: string | undefined) => string | undefined
      log: (message: string) => void
    }
  ) {}

  /** This instance's relay to `target` (on its port when it can be had); its port. */
  own(target: URL): Promise<number> {
    this.#own ??= this.#start(target, Number(target.port) || 80, false)
      .then((relay) => relay!.port)
      .catch((error) => {
        this.#own = undefined
        throw error
      })
    return this.#own
  }

  /** Relays on the recorded ports not served here yet that can be bound now, forwarding to `target`. */
  async others(target: URL): Promise<void> {
    const dir = this.options.dir
    if (!dir) return
    const names = await readdir(dir).catch((): string[] => [])
    const ports = names.map(Number).filter(Boolean)
    for (const port of ports) {
      if (this.#relays.has(port)) continue
      const relay = this.#start(target, port, true).catch((error) => {
        this.#relays.delete(port)
        if (!this.#said.has(port)) {
          this.#said.add(port)
          this.options.log(`model proxy relay port ${port} not served here yet: ${error.message}`)
        }
        return undefined
      })
      this.#relays.set(port, relay)
      await relay
    }
  }

  /** `adopted`: another instance's recorded port, bound exactly and alone. */
  async #start(target: URL, port: number, adopted: boolean): Promise<ModelProxyRelay> {
    const relay = await startModelProxyRelay({
      host: this.options.host,
      target,
      preferredPort: port,
      shared: this.options.dir !== undefined && !adopted,
      exact: adopted,
      answersHere: this.options.answersHere,
    })
    this.#relays.set(relay.port, Promise.resolve(relay))
    await this.options.open(relay.port)
    if (this.options.dir && !adopted) {
      // The parent (<storage>/runtime) holds the framework caches agents run from: made with
      // the default mode, never 0700 (a recursive mkdir gives its mode to every folder it makes).
      await mkdir(dirname(this.options.dir), { recursive: true })
      await mkdir(this.options.dir, { recursive: true, mode: 0o700 })
      await writeFile(join(this.options.dir, String(relay.port)), '', { mode: 0o600 })
    }
    this.options.log(`model proxy relay for agents on ${this.options.host}:${relay.port}`)
    return relay
  }

  async close(): Promise<void> {
    for (const pending of this.#relays.values()) {
      const relay = await pending.catch(() => undefined)
      relay?.server.close()
    }
    this.#relays.clear()
    this.#own = undefined
  }
}
