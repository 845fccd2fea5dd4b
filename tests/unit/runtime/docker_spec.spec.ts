import { test } from '@japa/runner'
import openclaw, { OPENCLAW_IMAGE } from '../../../plugins/openclaw/index.ts'
import hermes, { HERMES_IMAGE, HERMES_PYPI_VERSION } from '../../../plugins/hermes/index.ts'
import { buildContainerSpec, dockerNames, LABELS } from '#runtime/docker/container_spec'
import { usageFromDockerStats } from '#runtime/docker/docker_stats'
import { renderedFilesArchive } from '#runtime/docker/rendered_files'
import { DockerStreamDemuxer, LineSplitter, demuxDockerLogs } from '#runtime/docker/docker_streams'
import { createTar, parseTar } from '#runtime/files/tar'
import type { AgentRuntimeContext } from '#plugins/types'

const agentId = '7d0c3a52-1f7e-4c55-9a53-0f4c2b8e9e11'

function dockerContext(
  port: number,
  paths: { state: string; workspace: string }
): AgentRuntimeContext {
  return {
    agentId,
    config: { personality: 'Calm and precise.' },
    modelProxy: {
      baseUrl: 'http://host.docker.internal:3333/v1',
      token: 'proxy-token-abc',
      model: 'local-dev',
    },
    driver: 'docker',
    port,
    gatewayToken: 'g'.repeat(48),
    paths,
  }
}

test.group('Runtime / docker container spec', () => {
  test('an openclaw agent container: image, limits, hardening, volume, network, loopback port, labels', ({
    assert,
  }) => {
    const context = dockerContext(openclaw.defaultPort, openclaw.containerPaths)
    const spec = buildContainerSpec({
      agentId,
      framework: 'openclaw',
      launch: openclaw.containerLaunch(context),
      containerPort: openclaw.defaultPort,
      statePath: openclaw.containerPaths.state,
      resources: { memoryMb: 1536, cpus: 1.5, pids: 256 },
      maxRestarts: 5,
    })
    const names = dockerNames(agentId)

    assert.equal(spec.name, `agent-host-${agentId}`)
    assert.equal(spec.Image, OPENCLAW_IMAGE)
    assert.match(OPENCLAW_IMAGE, /^ghcr\.io\/openclaw\/openclaw:2026\.9\.\d+$/)
    assert.equal(spec.User, '1000:1000')
    assert.deepEqual(spec.Labels, {
      [LABELS.managed]: 'true',
      [LABELS.agentId]: agentId,
      [LABELS.framework]: 'openclaw',
    })

    const host = spec.HostConfig!
    assert.equal(host.Memory, 1536 * 1024 * 1024)
    assert.equal(host.MemorySwap, 1536 * 1024 * 1024, 'no swap beyond the memory limit')
    assert.equal(host.NanoCpus, 1.5e9)
    assert.equal(host.CpuShares, 512, 'lower CPU weight than the default 1024')
    assert.equal(host.PidsLimit, 256)
    assert.deepEqual(host.CapDrop, ['ALL'])
    assert.isUndefined(host.CapAdd)
    assert.deepEqual(host.SecurityOpt, ['no-new-privileges:true'])
    assert.isNotTrue(host.Privileged)
    assert.deepEqual(host.Mounts, [
      { Type: 'volume', Source: names.volume, Target: '/home/node/.openclaw', ReadOnly: false },
    ])
    assert.isUndefined(host.Binds, 'no host folders are mounted')
    assert.equal(host.NetworkMode, names.network)
    assert.deepEqual(Object.keys(spec.NetworkingConfig!.EndpointsConfig!), [names.network])
    assert.deepEqual(spec.ExposedPorts, { '18789/tcp': {} })
    assert.deepEqual(host.PortBindings, { '18789/tcp': [{ HostIp: '127.0.0.1', HostPort: '' }] })
    assert.deepEqual(host.RestartPolicy, { Name: 'on-failure', MaximumRetryCount: 5 })
    assert.equal(host.LogConfig?.Type, 'json-file')
    assert.isDefined(host.LogConfig?.Config?.['max-size'], 'container logs are size-capped')

    const env = Object.fromEntries(spec.Env!.map((entry) => entry.split(/=(.*)/s).slice(0, 2)))
    assert.equal(env.OPENCLAW_STATE_DIR, '/home/node/.openclaw')
    assert.equal(env.OPENCLAW_CONFIG_PATH, '/home/node/.openclaw/openclaw.json')
    assert.equal(env.OPENCLAW_GATEWAY_TOKEN, 'g'.repeat(48))
    assert.equal(env.OPENCLAW_DISABLE_BONJOUR, '1')
    assert.equal(env.OPENCLAW_NO_RESPAWN, '1')
    assert.equal(env.AGENT_HOST_MODEL_KEY, 'proxy-token-abc')
    for (const name of ['APP_KEY', 'DATABASE_URL', 'MODEL_API_KEY']) assert.notProperty(env, name)
  })

  test('a run scheduled with an id carries it as a label (the id the API answered)', ({
    assert,
  }) => {
    const context = dockerContext(openclaw.defaultPort, openclaw.containerPaths)
    const input = {
      agentId,
      framework: 'openclaw',
      launch: openclaw.containerLaunch(context),
      containerPort: openclaw.defaultPort,
      statePath: openclaw.containerPaths.state,
      resources: { memoryMb: 1536, cpus: 1.5, pids: 256 },
      maxRestarts: 5,
    }
    const scheduled = buildContainerSpec({ ...input, runId: 'docker-0123456789ab' })
    assert.equal(scheduled.Labels?.[LABELS.runId], 'docker-0123456789ab')
    assert.notProperty(buildContainerSpec(input).Labels, LABELS.runId)
  })

  test('a hermes agent container runs `gateway run` with its API server on all interfaces inside', ({
    assert,
  }) => {
    const context = dockerContext(hermes.defaultPort, hermes.containerPaths)
    const spec = buildContainerSpec({
      agentId,
      framework: 'hermes',
      launch: hermes.containerLaunch(context),
      containerPort: hermes.defaultPort,
      statePath: hermes.containerPaths.state,
      resources: hermes.resources,
      maxRestarts: 3,
    })
    assert.equal(spec.Image, HERMES_IMAGE)
    // The registry image is the release the process driver installs from PyPI.
    assert.equal(HERMES_IMAGE, `nousresearch/hermes-agent:${HERMES_PYPI_VERSION}`)
    assert.deepEqual(spec.Cmd, ['gateway', 'run'])
    assert.deepEqual(spec.HostConfig!.PortBindings, {
      '8642/tcp': [{ HostIp: '127.0.0.1', HostPort: '' }],
    })
    assert.equal(spec.HostConfig!.Mounts![0].Target, '/opt/data')
    assert.equal(spec.HostConfig!.Memory, 2048 * 1024 * 1024)
    const env = Object.fromEntries(spec.Env!.map((entry) => entry.split(/=(.*)/s).slice(0, 2)))
    assert.equal(env.API_SERVER_ENABLED, 'true')
    assert.equal(env.API_SERVER_HOST, '0.0.0.0')
    assert.equal(env.API_SERVER_PORT, '8642')
    assert.isAtLeast(env.API_SERVER_KEY.length, 32)
  })

  test('rendered files travel as one archive into the state volume, owned by the container user', ({
    assert,
  }) => {
    const archive = renderedFilesArchive(
      [
        { root: 'state', path: 'openclaw.json', content: '{}', mode: 0o600 },
        { root: 'workspace', path: 'SOUL.md', content: 'soul' },
        { root: 'workspace', path: 'memory/2026-01-01.md', content: 'note' },
      ],
      openclaw.containerPaths,
      { uid: 1000, gid: 1000 }
    )
    const entries = parseTar(archive)
    assert.deepEqual(
      entries.map((entry) => `${entry.type}:${entry.name}`),
      [
        'file:openclaw.json',
        'directory:workspace',
        'file:workspace/SOUL.md',
        'directory:workspace/memory',
        'file:workspace/memory/2026-01-01.md',
      ]
    )
    const config = entries.find((entry) => entry.name === 'openclaw.json')!
    assert.equal(config.mode, 0o600)
    assert.equal(config.uid, 1000)
    assert.equal(config.gid, 1000)
    assert.equal(
      entries.find((entry) => entry.name === 'workspace/SOUL.md')!.content!.toString(),
      'soul'
    )
    assert.throws(() =>
      renderedFilesArchive(
        [{ root: 'state', path: '../escape', content: 'x' }],
        openclaw.containerPaths,
        { uid: 0, gid: 0 }
      )
    )
  })

  test('tar archives round-trip, long names included', ({ assert }) => {
    const longName = `${'deep/'.repeat(30)}file.txt`
    const archive = createTar([
      { name: 'dir', type: 'directory' },
      { name: 'dir/a.txt', type: 'file', content: Buffer.from('héllo') },
      { name: longName, type: 'file', content: Buffer.alloc(1500, 'x') },
    ])
    assert.equal(archive.length % 512, 0)
    const entries = parseTar(archive)
    assert.deepEqual(
      entries.map((entry) => [entry.name, entry.type, entry.size]),
      [
        ['dir', 'directory', 0],
        ['dir/a.txt', 'file', Buffer.byteLength('héllo')],
        [longName, 'file', 1500],
      ]
    )
    assert.equal(entries[1].content!.toString('utf8'), 'héllo')
  })

  test('container stats become cpu percent of one core and memory without page cache', ({
    assert,
  }) => {
    const usage = usageFromDockerStats(
      {
        cpu_stats: {
          cpu_usage: { total_usage: 3_000_000_000 },
          system_cpu_usage: 20_000_000_000,
          online_cpus: 2,
        },
        precpu_stats: {
          cpu_usage: { total_usage: 2_000_000_000 },
          system_cpu_usage: 10_000_000_000,
        },
        memory_stats: {
          usage: 600 * 1024 * 1024,
          limit: 8 * 1024 ** 3,
          stats: { inactive_file: 100 * 1024 * 1024 },
        },
      },
      2048 * 1024 * 1024
    )
    assert.deepEqual(usage, { cpuPercent: 20, memoryMb: 500, memoryLimitMb: 2048 })
    assert.deepEqual(usageFromDockerStats({}, 0), { cpuPercent: 0, memoryMb: 0, memoryLimitMb: 0 })
  })

  test('multiplexed log frames split back into lines, across chunk boundaries', ({ assert }) => {
    const frame = (type: number, text: string) => {
      const payload = Buffer.from(text)
      const head = Buffer.alloc(8)
      head[0] = type
      head.writeUInt32BE(payload.length, 4)
      return Buffer.concat([head, payload])
    }
    const raw = Buffer.concat([frame(1, 'out one\nout '), frame(2, 'two\nerr\n')])
    assert.equal(demuxDockerLogs(raw), 'out one\nout two\nerr\n')

    const demuxer = new DockerStreamDemuxer()
    const lines = new LineSplitter()
    const seen: string[] = []
    for (let i = 0; i < raw.length; i += 5)
      seen.push(...lines.push(demuxer.push(raw.subarray(i, i + 5))))
    assert.deepEqual(seen, ['out one', 'out two', 'err'])
  })
})
