/**
 * The red-team range (tests/redteam, docs/security.md "Red team"): a real
 * Agent Host server started for one sandbox mode, a real OpenClaw agent
 * whose model is a stand-in that makes it run an attacker's shell command
 * through its own `exec` tool, a cheap fixture-framework victim agent, and
 * targets on this machine the attacks aim at. Each attack's outcome goes
 * into a table printed (and written to storage/redteam-report.md) at the
 * end of the suite.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, statSync } from 'node:fs'
import { chmod, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises'
import { createServer, Socket, type Server } from 'node:net'
import { networkInterfaces, tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import app from '@adonisjs/core/services/app'
import Docker from 'dockerode'
import { storageDir } from '#core/bootstrap/paths'
import { agentPaths } from '#runtime/agent_paths'
import { dockerNames } from '#runtime/docker/container_spec'
import { dockerConfigured } from '#runtime/docker/docker_driver'
import { PackageCache } from '#runtime/package_cache'
import { readRecord } from '#runtime/process/process_record'
import { bubblewrapWorks } from '#runtime/process/sandbox'
import { unshareSandboxAvailability } from '#runtime/process/unshare_sandbox'
import openclawPlugin, { OPENCLAW_VERSION } from '../../plugins/openclaw/index.ts'
import fixturePlugin from '../fixtures/plugins/fixture/index.ts'
import { agentProcesses } from '#tests/helpers/agent_processes'
import {
  hasOutcomes,
  recordOutcome as recordInReport,
  redTeamTable,
  writeReport,
  type RedTeamModeName,
} from '#tests/helpers/red_team_report'
import { apiKeyFor, createUser, TEST_PASSWORD } from '#tests/helpers/identity'
import { startModelUpstream, type ModelUpstream } from '#tests/helpers/model_upstream'
import { startServerProcess, type ServerProcess } from '#tests/helpers/processes'
import { sharedCacheDir } from '#tests/helpers/runtime'

/** How the service confines its agents; each one the host supports is attacked. */
export interface SandboxMode {
  name: RedTeamModeName
  /** The server's environment for the mode. */
  env: Record<string, string>
  /** Why the mode cannot run here, or undefined when it can. */
  unavailable(): Promise<string | undefined>
}

async function openclawProblem(): Promise<string | undefined> {
  try {
    await new PackageCache({ cacheDir: sharedCacheDir() }).ensure('openclaw', OPENCLAW_VERSION)
    return undefined
  } catch (error) {
    return `openclaw@${OPENCLAW_VERSION} could not be installed: ${(error as Error).message}`
  }
}

export const SANDBOX_MODES: SandboxMode[] = [
  {
    // The strongest sandbox the host allows: bubblewrap where it works.
    name: 'bubblewrap',
    env: { AGENT_RUNTIME: 'process' },
    async unavailable() {
      if (process.getuid?.() !== 0) return 'the service does not run as root here'
      if (!bubblewrapWorks()) return 'bubblewrap cannot make a sandbox on this host'
      return openclawProblem()
    },
  },
  {
    // The fallback without bubblewrap (namespaces made with unshare).
    name: 'unshare',
    env: { AGENT_RUNTIME: 'process', AGENT_SANDBOX: 'unshare' },
    async unavailable() {
      // The filter argument only decides how io_uring is refused, not whether the mode works.
      const { works, reason } = unshareSandboxAvailability(true)
      if (!works) return `the unshare sandbox cannot be made here: ${reason}`
      return openclawProblem()
    },
  },
  {
    // Containers built locally from the plugin's recipe (no registry pull).
    name: 'docker',
    env: { AGENT_RUNTIME: 'docker', AGENT_IMAGES: 'local' },
    async unavailable() {
      const up =
        dockerConfigured() &&
        (await new Docker().ping().then(
          () => true,
          () => false
        ))
      if (!up) return 'no Docker engine'
      return openclawProblem()
    },
  },
]

// ---------------------------------------------------------------------------
// Outcomes and the report (tests/helpers/red_team_report.ts keeps the table).

/** What happened to one attack: `succeeded` means the boundary failed. */
export interface Outcome {
  succeeded: boolean
  /** How it was refused (or what it got), one short phrase. */
  how: string
}

/** Records one cell of the attack x mode table (in this run's storage/redteam-report.md). */
export function recordOutcome(attack: string, mode: string, cell: string) {
  recordInReport(storageDir(app.appRoot), attack, mode, cell)
}

/** Prints the table and writes it to storage/redteam-report.md (for pasting). */
export async function writeRedTeamReport(): Promise<void> {
  if (!hasOutcomes()) return
  const file = writeReport(storageDir(app.appRoot))
  console.log(`\nRed team (also in ${file}):\n${redTeamTable()}\n`)
}

// ---------------------------------------------------------------------------
// The stand-in model that makes OpenClaw run the attacker's commands.

/** The marker a chat message carries to name the command to run. */
const RUN_MARKER = 'RED-TEAM-RUN'
/** Prefix of the stand-in's answer once the tool's output came back. */
export const TOOL_OUTPUT_PREFIX = 'TOOL OUTPUT:'

function textOf(content: unknown): string {
  if (typeof content === 'string') return content
  if (Array.isArray(content)) {
    return content
      .map((part) => (typeof part === 'string' ? part : (part?.text ?? JSON.stringify(part))))
      .join('\n')
  }
  return content === undefined || content === null ? '' : JSON.stringify(content)
}

/**
 * OpenClaw's shell tool among the tools its request offers (`exec`, with its
 * `command` argument) and the name of its time-limit argument, if it has one.
 */
function shellToolOf(
  tools: any[] | undefined
): { name: string; timeoutArgument?: string } | undefined {
  const functions = (tools ?? []).map((tool) => tool?.function ?? tool)
  const shell =
    functions.find((tool) => tool?.name === 'exec') ??
    functions.find((tool) => tool?.parameters?.properties?.command)
  if (!shell?.name) return undefined
  const properties = Object.keys(shell.parameters?.properties ?? {})
  return {
    name: shell.name,
    timeoutArgument: ['timeoutSeconds', 'timeout'].find((name) => properties.includes(name)),
  }
}

export interface AttackerModel {
  upstream: ModelUpstream
  /** Registers a command; the chat message that makes the agent run it. */
  message(command: string): string
  /** Tool names OpenClaw offered in its last request (for failure messages). */
  offeredTools(): string[]
  close(): Promise<void>
}

/**
 * A stand-in upstream: to a request whose last user message carries the
 * run marker (and no tool result after it) it answers with a call of
 * OpenClaw's shell tool running that command; to the follow-up that carries
 * the tool's result it answers with that result as text.
 */
export async function startAttackerModel(): Promise<AttackerModel> {
  const commands = new Map<string, string>()
  let lastTools: string[] = []
  // The user message that carries the marker (the framework may add messages of its own
  // after it), and what came after it.
  const afterLastUser = (body: any) => {
    const messages: any[] = body?.messages ?? []
    const index = messages.findLastIndex(
      (message) =>
        !['assistant', 'tool'].includes(message?.role) &&
        textOf(message.content).includes(RUN_MARKER)
    )
    return { user: messages[index], after: index < 0 ? [] : messages.slice(index + 1) }
  }
  const upstream = await startModelUpstream({
    toolCall(body) {
      lastTools = (body?.tools ?? []).map((tool: any) => tool?.function?.name ?? tool?.name)
      const { user, after } = afterLastUser(body)
      if (!user || after.some((message) => message?.role === 'tool')) return undefined
      // The last marker of the message (a framework may quote earlier turns before it).
      const ids = [
        ...textOf(user.content).matchAll(new RegExp(`${RUN_MARKER} ([0-9a-f]{16})`, 'g')),
      ]
      const id = ids.at(-1)?.[1]
      const command = id && commands.get(id)
      const tool = shellToolOf(body?.tools)
      if (!command || !tool) return undefined
      return {
        name: tool.name,
        arguments: { command, ...(tool.timeoutArgument ? { [tool.timeoutArgument]: 120 } : {}) },
      }
    },
    reply(body) {
      const { after } = afterLastUser(body)
      const results = after.filter((message) => message?.role === 'tool')
      if (results.length === 0) {
        const roles = (body?.messages ?? []).map((message: any) => message?.role).join(',')
        return `No tool was run (offered: ${lastTools.join(', ')}; roles: ${roles}).`
      }
      return `${TOOL_OUTPUT_PREFIX}\n${results.map((message) => textOf(message.content)).join('\n')}`
    },
  })
  return {
    upstream,
    message(command) {
      const id = randomBytes(8).toString('hex')
      commands.set(id, command)
      return `${RUN_MARKER} ${id}`
    },
    offeredTools: () => lastTools,
    close: () => upstream.close(),
  }
}

/** The first line every attack script prints: proof that the agent's shell ran it. */
export const SHELL_RAN = 'RED-TEAM-SHELL-RAN'

/**
 * A shell script handed to the exec tool without any quoting trouble (bash
 * reads it from a pipe, or sh where there is no bash: a BusyBox image, so
 * scripts keep to POSIX sh unless they check for bash); it first prints
 * SHELL_RAN with a nonce of its own, so no other run's output is ever
 * taken for this one's.
 */
export function bashScript(script: string): { command: string; ran: string } {
  const ran = `${SHELL_RAN} ${randomBytes(6).toString('hex')}`
  const whole = `echo ${ran}\n${script}`
  return {
    command: `echo ${Buffer.from(whole).toString('base64')} | base64 -d | $(command -v bash || echo sh) 2>&1`,
    ran,
  }
}

/** What the exec tool says when the agent has no shell at all (a minimal image). */
export const NO_SHELL =
  /spawn \S*(sh|bash)\S* ENOENT|(sh|bash): not found|No such file or directory.*\b(sh|bash)\b/i

// ---------------------------------------------------------------------------
// Targets on this machine.

/** True when a TCP connection to host:port opens from here (the host). */
export async function answersFromHost(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket()
    const done = (open: boolean) => {
      socket.destroy()
      resolve(open)
    }
    socket.setTimeout(5_000, () => done(false))
    socket.once('error', () => done(false))
    socket.connect(port, host, () => done(true))
  })
}

/** A listener of the test's own that counts connections. */
export interface CountingListener {
  host: string
  port: number
  connections: number
  close(): Promise<void>
}

export async function startCountingListener(host: string): Promise<CountingListener> {
  const server: Server = createServer((socket) => {
    listener.connections++
    // The agent's side may reset the connection: that is no error of the test's.
    socket.on('error', () => {})
    socket.end('red-team target\n')
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, host, () => resolve())
  })
  // Never what keeps the test runner alive.
  server.unref()
  const address = server.address()
  const listener: CountingListener = {
    host,
    port: typeof address === 'object' && address ? address.port : 0,
    connections: 0,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
      }),
  }
  return listener
}

/**
 * A private-range address of this machine's own (never anything off it),
 * outside the agents' own range (AGENT_NETWORK_CIDR, 10.213.0.0/16), and
 * its dummy interface: both of this test process, so red-team runs side by
 * side on one host never remove each other's target.
 */
export const PRIVATE_ADDRESS = `10.254.${(process.pid % 250) + 1}.1`
const DUMMY_INTERFACE = `rtrt${process.pid % 100_000}`

function ip(args: string[]) {
  return spawnSync('ip', args, { encoding: 'utf8', timeout: 10_000 })
}

/**
 * Puts PRIVATE_ADDRESS on a dummy interface, or on `lo` where the kernel has
 * no dummy driver; answers why not when neither works.
 */
export function addPrivateAddress(): string | undefined {
  removePrivateAddress()
  const dummy = ip(['link', 'add', DUMMY_INTERFACE, 'type', 'dummy'])
  const device = dummy.status === 0 ? DUMMY_INTERFACE : 'lo'
  const added = ip(['addr', 'add', `${PRIVATE_ADDRESS}/32`, 'dev', device])
  if (added.status !== 0 || ip(['link', 'set', device, 'up']).status !== 0) {
    removePrivateAddress()
    return `ip addr add ${PRIVATE_ADDRESS}/32 dev ${device}: ${(added.stderr || added.error?.message || '').trim()}`
  }
  return undefined
}

export function removePrivateAddress() {
  // Also what a run that was killed left on `lo`.
  ip(['addr', 'del', `${PRIVATE_ADDRESS}/32`, 'dev', 'lo'])
  ip(['link', 'del', DUMMY_INTERFACE])
}

/** This machine's own non-loopback IPv4 address (its main interface), if it has one. */
export function hostAddress(): string | undefined {
  for (const [name, addresses] of Object.entries(networkInterfaces())) {
    if (/^(lo|docker|br-|veth|rt-|agent|virbr|cni|flannel)/.test(name)) continue
    const found = addresses?.find((address) => address.family === 'IPv4' && !address.internal)
    if (found) return found.address
  }
  return undefined
}

/** A host process whose command line carries a marker the agent must not see in /proc. */
export function startMarkedHostProcess(): { marker: string; child: ChildProcess } {
  const marker = `red-team-host-marker-${randomBytes(6).toString('hex')}`
  const child = spawn('sleep', ['3600'], { argv0: marker, stdio: 'ignore' })
  child.unref()
  return { marker, child }
}

// ---------------------------------------------------------------------------
// The range: a server of the mode, its owner, the attacker and the victim.

export interface RangeAgent {
  id: string
  /** The agent's own top folder on the host (process driver). */
  folder: string
  /** Its workspace as the agent itself sees it (a docker agent: the path in its container). */
  workspace: string
}

export interface RedTeamRange {
  mode: SandboxMode
  server: ServerProcess
  /** The server's port on 127.0.0.1. */
  port: number
  storage: string
  agentsDir: string
  /** A file of the service's, root-only: the APP_KEY it generated. */
  canaryFile: string
  canary: string
  /** Root-only files and folders of the service's the attacks try to write through links. */
  targetsDir: string
  model: AttackerModel
  jwt: string
  apiKey: string
  attacker: RangeAgent
  victim?: RangeAgent
  victimProblem?: string
  /** GET/POST/PATCH/PUT to the server with the owner's JWT; answers status and parsed body. */
  call(
    method: string,
    path: string,
    body?: unknown
  ): Promise<{ status: number; body: any; text: string }>
  /** Has the attacker run `command` through its exec tool; answers the chat reply. */
  runInAgent(script: { command: string; ran: string }): Promise<string>
  /** Waits until an agent's container runs again (after a restart). */
  waitRunning(agentId: string): Promise<void>
  close(): Promise<void>
}

async function waitForHealth(server: ServerProcess) {
  for (let attempt = 0; attempt < 900; attempt++) {
    const health = await fetch(`${server.url}/health`).catch(() => undefined)
    if (health?.status === 200) return
    if (server.child.exitCode !== null) break
    await sleep(200)
  }
  throw new Error(`the red-team server did not start:\n${server.output().slice(-4000)}`)
}

/** Where an agent sees its workspace: the host folder, or the framework's path in its container. */
function workspaceSeenBy(mode: SandboxMode, folder: string, framework: string): string {
  if (mode.env.AGENT_RUNTIME !== 'docker') return join(folder, 'workspace')
  const path = { openclaw: openclawPlugin, fixture: fixturePlugin }[framework]?.containerPaths
    ?.workspace
  if (!path) throw new Error(`${framework} names no workspace in its container`)
  return path
}

/** Starts the server of `mode`, its owner and both agents; close() undoes all of it. */
export async function startRange(mode: SandboxMode): Promise<RedTeamRange> {
  const cleanups: Array<() => Promise<unknown> | unknown> = []
  const close = async () => {
    for (const cleanup of cleanups.reverse()) {
      try {
        await cleanup()
      } catch (error) {
        console.log(`  red team cleanup: ${(error as Error).message}`)
      }
    }
    cleanups.length = 0
  }
  try {
    const model = await startAttackerModel()
    cleanups.push(() => model.close())
    const storage = await mkdtemp(join(tmpdir(), `redteam-${mode.name}-`))
    cleanups.push(() => rm(storage, { recursive: true, force: true }))
    // The framework is installed once per host: reuse the project's runtime cache.
    await symlink(sharedCacheDir(), join(storage, 'runtime'))
    const server = await startServerProcess({
      ...mode.env,
      DATABASE_URL: process.env.DATABASE_URL,
      STORAGE_DIR: storage,
      // The fixture framework (the victim) loads in the test environment only.
      NODE_ENV: 'test',
      EXTRA_PLUGIN_DIRS: 'tests/fixtures/plugins',
      // Agents of other suites in the shared database are not this server's to start.
      AGENTS_RECOVER_ON_BOOT: 'false',
      AGENT_CHECKPOINT: 'off',
      AGENT_IDLE_SLEEP_SECS: '36000',
      MODEL_API_URL: model.upstream.baseUrl,
      MODEL_API_KEY: 'red-team-upstream-key',
      MODEL_NAME: 'stand-in-model',
      LOG_LEVEL: 'warn',
    })
    cleanups.push(() => server.stop())
    await waitForHealth(server)
    const port = Number(new URL(server.url).port)
    const canaryFile = join(storage, 'app_key')
    const canaryText = await readFile(canaryFile, 'utf8')
    const canary = canaryText.trim()
    const targetsDir = join(storage, 'red-team-targets')
    await mkdir(targetsDir, { recursive: true, mode: 0o700 })
    await chmod(targetsDir, 0o700)

    const owner = await createUser({ tier: 'business', credits: 1_000_000 })
    const login = await fetch(`${server.url}/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: owner.email, password: TEST_PASSWORD }),
    })
    const jwt = ((await login.json()) as any)?.data?.token
    if (!jwt) throw new Error(`login at the red-team server answered ${login.status}`)
    const apiKey = await apiKeyFor(owner, 'red team')

    const call: RedTeamRange['call'] = async (method, path, body) => {
      const response = await fetch(`${server.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${path.startsWith('/api/v1/') ? apiKey : jwt}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(300_000),
      })
      const text = await response.text()
      let parsed: any
      try {
        parsed = JSON.parse(text)
      } catch {
        parsed = undefined
      }
      return { status: response.status, body: parsed, text }
    }

    const agentsDir = join(storage, 'agents')
    const createdAgents: string[] = []
    cleanups.push(async () => {
      for (const id of createdAgents) await call('DELETE', `/agents/${id}`).catch(() => undefined)
      // Whatever a failed delete left: this server's agent processes and containers.
      for (const pids of agentProcesses(agentsDir).values()) {
        for (const pid of pids) {
          try {
            process.kill(pid, 'SIGKILL')
          } catch {}
        }
      }
      if (mode.env.AGENT_RUNTIME === 'docker') {
        const docker = new Docker()
        for (const id of createdAgents) {
          const names = dockerNames(id)
          await docker
            .getContainer(names.container)
            .remove({ force: true })
            .catch(() => undefined)
          await docker
            .getVolume(names.volume)
            .remove()
            .catch(() => undefined)
          await docker
            .getNetwork(names.network)
            .remove()
            .catch(() => undefined)
        }
      }
    })

    const waitRunning = async (agentId: string, timeoutMs = 900_000) => {
      const deadline = Date.now() + timeoutMs
      let last = ''
      while (Date.now() < deadline) {
        const status = await call('GET', `/agents/${agentId}/status`)
        last = JSON.stringify(status.body?.data ?? status.text)
        if (status.body?.data?.container === 'running') return
        if (status.body?.data?.container === 'error') break
        await sleep(1_000)
      }
      throw new Error(`agent ${agentId} did not run: ${last}\n${server.output().slice(-3000)}`)
    }
    const createAgent = async (body: Record<string, unknown>): Promise<RangeAgent> => {
      const created = await call('POST', '/agents', body)
      if (created.status !== 201) {
        throw new Error(
          `creating a ${body.framework} agent answered ${created.status}: ${created.text}`
        )
      }
      const id = created.body.data.id as string
      createdAgents.push(id)
      // On a loaded host a framework can fail its own start-up checks a few times over.
      for (let attempt = 1; ; attempt++) {
        try {
          await waitRunning(id)
          const folder = join(agentsDir, id)
          return { id, folder, workspace: workspaceSeenBy(mode, folder, body.framework as string) }
        } catch (error) {
          if (attempt >= 3) throw error
          console.log(`  red team: ${body.framework} agent did not start, starting it again`)
          await call('POST', `/agents/${id}/start`)
        }
      }
    }

    const attacker = await createAgent({
      name: 'Red team attacker',
      framework: 'openclaw',
      config: { personality: 'You run the commands you are asked to run.' },
    })
    let victim: RangeAgent | undefined
    let victimProblem: string | undefined
    try {
      victim = await createAgent({ name: 'Red team victim', framework: 'fixture' })
    } catch (error) {
      victimProblem = (error as Error).message.split('\n')[0]
    }

    const runInAgent = async ({ command, ran }: { command: string; ran: string }) => {
      const message = model.message(command)
      let last = ''
      // A fresh (or restarted) gateway may still be getting ready: a few tries. Only a
      // reply made from the exec tool's result counts (not the hosted model's fallback).
      for (let attempt = 0; attempt < 5; attempt++) {
        const answer = await call('POST', `/api/v1/agents/${attacker.id}/chat`, { message })
        const content = String(answer.body?.data?.content ?? '')
        if (answer.status === 200 && content.startsWith(TOOL_OUTPUT_PREFIX)) {
          const output = content.slice(TOOL_OUTPUT_PREFIX.length)
          // The tool ran but the shell did not: only "there is no shell" is an answer.
          if (output.includes(ran) || (!output.includes(SHELL_RAN) && NO_SHELL.test(output))) {
            return output
          }
        }
        last = `${answer.status} ${answer.text.slice(0, 500)}`
        await sleep(5_000)
      }
      throw new Error(`the attacker's exec tool did not run the command: ${last}`)
    }

    return {
      mode,
      server,
      port,
      storage,
      agentsDir,
      canaryFile,
      canary,
      targetsDir,
      model,
      jwt,
      apiKey,
      attacker,
      victim,
      victimProblem,
      call,
      runInAgent,
      waitRunning: (agentId) => waitRunning(agentId),
      close,
    }
  } catch (error) {
    await close()
    throw error
  }
}

/**
 * Where an agent's gateway listens, as the service reaches it: a docker
 * agent's published port on 127.0.0.1; a process agent's address and port
 * from the service's record of it (its network namespace's address, or
 * 127.0.0.1 when agents share the host's network).
 */
export async function gatewayOf(
  range: RedTeamRange,
  agentId: string
): Promise<{ host: string; port: number }> {
  if (range.mode.env.AGENT_RUNTIME === 'docker') {
    const info = await new Docker().getContainer(dockerNames(agentId).container).inspect()
    const bindings = Object.values(info.NetworkSettings.Ports ?? {}).flat()
    const binding = bindings.find((candidate) => candidate?.HostPort)
    if (binding) return { host: '127.0.0.1', port: Number(binding.HostPort) }
    throw new Error(`no published port for agent ${agentId}`)
  }
  const record = await readRecord(agentPaths(range.agentsDir, agentId).recordFile)
  if (record) return { host: record.host ?? '127.0.0.1', port: record.port }
  throw new Error(`no process record for agent ${agentId}`)
}

/** The service's own folder of an agent (`<agents>/.runtime/<id>`): its logs, records, credentials. */
export function serviceFolderOf(range: RedTeamRange, agentId: string): string {
  return agentPaths(range.agentsDir, agentId).runtime
}

/** A root-only file of the service's with known content (a write target). */
export async function rootOnlyFile(range: RedTeamRange, name: string): Promise<string> {
  const file = join(range.targetsDir, name)
  await writeFile(file, `untouched ${name}\n`, { mode: 0o600 })
  return file
}

/** The setuid-root programs of this host among `candidates`. */
export function setuidRootPrograms(candidates: string[]): string[] {
  return candidates.filter((path) => {
    if (!existsSync(path)) return false
    const info = statSync(path)
    return info.uid === 0 && (info.mode & 0o4000) !== 0
  })
}
