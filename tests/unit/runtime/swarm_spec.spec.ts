import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { LABELS } from '#runtime/docker/container_spec'
import { PAUSED_LABEL, serviceInfo } from '#runtime/swarm/service_info'
import { buildServiceSpec, GATE_FILE, taskVolumeName } from '#runtime/swarm/service_spec'

const agentId = '7d0c3a52-1f7e-4c55-9a53-0f4c2b8e9e11'

function spec() {
  return buildServiceSpec({
    agentId,
    framework: 'fixture',
    launch: { image: 'agent-host/fixture:1', env: { A: 'b' }, user: '1000:1000' },
    argv: ['/usr/local/bin/node', '/data/fixture-server.mjs'],
    containerPort: 8080,
    statePath: '/data',
    workspacePath: '/data/workspace',
    resources: { memoryMb: 256, cpus: 0.5, pids: 64 },
    maxRestarts: 5,
    replicas: 0,
    runId: 'swarm-1',
  })
}

function task(id: string, state: string, desired = 'running', extra: object = {}) {
  return { ID: id, NodeID: 'node-a', DesiredState: desired, Status: { State: state }, ...extra }
}

test.group('Runtime / swarm service spec', () => {
  test('any node, a volume per task, the framework behind the state gate', ({ assert }) => {
    const template = spec().TaskTemplate
    assert.notProperty(template, 'Placement')
    const [volume] = template.ContainerSpec.Mounts
    assert.equal(volume.Source, `agent-host-${agentId}-state-{{.Task.ID}}`)
    assert.equal(volume.Target, '/data')
    assert.deepEqual(volume.VolumeOptions?.Labels, {
      [LABELS.managed]: 'true',
      [LABELS.agentId]: agentId,
    })
    assert.include(template.ContainerSpec.Env, 'AGENT_HOST_TASK={{.Task.ID}}')
    assert.include(template.ContainerSpec.Env, 'A=b')
    const command = template.ContainerSpec.Command
    assert.deepEqual(command.slice(0, 2), ['/bin/sh', '-c'])
    assert.deepEqual(command.slice(3), [
      'agent-host-gate',
      `/data/${GATE_FILE}`,
      '/usr/local/bin/node',
      '/data/fixture-server.mjs',
    ])
    assert.equal(taskVolumeName(agentId, 'abc'), `agent-host-${agentId}-state-abc`)
  })

  test('the gate waits until its file names the task, then becomes the framework', ({ assert }) => {
    // The gate script as the service runs it, here with a stand-in framework (echo).
    const script = spec().TaskTemplate.ContainerSpec.Command[2]
    const dir = mkdtempSync(join(tmpdir(), 'swarm-gate-'))
    const gate = join(dir, GATE_FILE)
    try {
      writeFileSync(gate, 'another-task')
      const waiting = spawnSync('/bin/sh', ['-c', script, 'gate', gate, 'echo', 'ran'], {
        env: { PATH: process.env.PATH, AGENT_HOST_TASK: 'this-task' },
        encoding: 'utf8',
        timeout: 1500,
      })
      assert.equal(waiting.stdout, '', 'another task named: it keeps waiting')
      writeFileSync(gate, 'this-task\n')
      const released = spawnSync('/bin/sh', ['-c', script, 'gate', gate, 'echo', 'ran'], {
        env: { PATH: process.env.PATH, AGENT_HOST_TASK: 'this-task' },
        encoding: 'utf8',
        timeout: 5000,
      })
      assert.equal(released.stdout, 'ran\n')
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('what the tasks say: running, frozen by a warm sleep, starting, given up', async ({
    assert,
  }) => {
    const service = (labels: Record<string, string> = {}, replicas = 1) => ({
      Spec: {
        Labels: { [LABELS.framework]: 'fixture', [LABELS.runId]: 'swarm-1', ...labels },
        Mode: { Replicated: { Replicas: replicas } },
      },
    })
    const address = async () => '10.0.0.12'
    const running = task('t2', 'running', 'running', {
      Status: {
        State: 'running',
        Timestamp: '2026-01-01T00:00:00Z',
        PortStatus: { Ports: [{ PublishedPort: 30001 }] },
      },
    })
    const info = await serviceInfo(agentId, service(), [running], address)
    assert.equal(info.state, 'running')
    assert.equal(info.baseUrl, 'http://10.0.0.12:30001')
    assert.equal(info.containerId, 'swarm-1')

    const frozen = await serviceInfo(agentId, service({ [PAUSED_LABEL]: 't2' }), [running], address)
    assert.equal(frozen.state, 'stopped')
    // A label naming an older task (its node was lost while it slept): the new one runs.
    const moved = await serviceInfo(agentId, service({ [PAUSED_LABEL]: 't1' }), [running], address)
    assert.equal(moved.state, 'running')

    const failed = task('t1', 'failed', 'shutdown', { Status: { State: 'failed', Err: 'exit 1' } })
    const restarting = await serviceInfo(
      agentId,
      service(),
      [task('t3', 'preparing'), failed],
      address
    )
    assert.equal(restarting.state, 'restarting')
    assert.equal(restarting.restartCount, 1)
    const gaveUp = await serviceInfo(agentId, service(), [failed], address)
    assert.equal(gaveUp.state, 'error')
    assert.equal(gaveUp.lastError, 'exit 1')
    const stopped = await serviceInfo(agentId, service({}, 0), [failed], address)
    assert.equal(stopped.state, 'stopped')
    const absent = await serviceInfo(agentId, undefined, [], address)
    assert.equal(absent.state, 'absent')
  })
})
