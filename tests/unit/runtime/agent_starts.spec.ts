import { test } from '@japa/runner'
import { AgentStarts } from '#runtime/agent_starts'
import { CapacityManager } from '#runtime/capacity/capacity_manager'
import { RunPlans } from '#runtime/run_plans'
import type { FrameworkResolver } from '#runtime/runtime_service_types'
import type { AgentRuntimeSpec, ContainerDriver, ContainerInfo } from '#runtime/types'

/** Preparations that end when the test says: how many run at once, and in which order. */
function heldPreparations() {
  const underWay = new Map<string, () => void>()
  const began: string[] = []
  let mostAtOnce = 0
  const create = (spec: AgentRuntimeSpec) =>
    new Promise<ContainerInfo>((resolve) => {
      began.push(spec.agentId)
      underWay.set(spec.agentId, () => {
        underWay.delete(spec.agentId)
        resolve({ state: 'stopped' } as unknown as ContainerInfo)
      })
      mostAtOnce = Math.max(mostAtOnce, underWay.size)
    })
  return { underWay, began, create, mostAtOnce: () => mostAtOnce }
}

function startsWith(create: (spec: AgentRuntimeSpec) => Promise<ContainerInfo>, atOnce?: number) {
  return new AgentStarts({
    driver: {
      resumes: () => false,
      start: async () => ({ state: 'starting' }) as ContainerInfo,
    } as unknown as ContainerDriver,
    frameworks: {
      framework: () => ({ resources: { memoryMb: 100 } }),
    } as unknown as FrameworkResolver,
    capacity: new CapacityManager({
      bootConcurrency: 100,
      memoryBudgetMb: 100_000,
      sleep: async () => {},
    }),
    plans: new RunPlans(),
    isReady: () => true,
    create,
    waitUntilReady: async () => {},
    preparesAtOnce: atOnce,
  })
}

const spec = (agentId: string, ownerId = agentId) =>
  ({ agentId, ownerId, framework: 'fixture' }) as AgentRuntimeSpec
const turns = async () => {
  for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve))
}

test.group('Runtime / agent starts: preparations', () => {
  test('at most preparesAtOnce starts prepare at once, in the order they came', async ({
    assert,
  }) => {
    const held = heldPreparations()
    const starts = startsWith(held.create, 2)
    const ids = ['a', 'b', 'c', 'd', 'e']
    const started = Promise.all(ids.map((agentId) => starts.startOrAdopt(spec(agentId))))
    await turns()
    assert.deepEqual(held.began, ['a', 'b'], 'two prepare, the rest wait their turn')
    held.underWay.get('b')!()
    await turns()
    assert.deepEqual(held.began, ['a', 'b', 'c'], 'the next in line takes the freed place')
    while (held.underWay.size > 0) {
      for (const finish of [...held.underWay.values()]) finish()
      await turns()
    }
    await started
    assert.deepEqual(held.began, ids)
    assert.equal(held.mostAtOnce(), 2)
  })

  test("accounts take turns: another account's first start prepares before a burst account's others", async ({
    assert,
  }) => {
    const held = heldPreparations()
    const starts = startsWith(held.create, 1)
    const burst = ['a1', 'a2', 'a3', 'a4'].map((agentId) =>
      starts.startOrAdopt(spec(agentId, 'burst'))
    )
    await turns()
    const probe = starts.startOrAdopt(spec('b1', 'probe'))
    while (held.underWay.size > 0) {
      for (const finish of [...held.underWay.values()]) finish()
      await turns()
    }
    await Promise.all([...burst, probe])
    assert.deepEqual(held.began, ['a1', 'b1', 'a2', 'a3', 'a4'])
  })

  test('0 is no limit: every start prepares at once', async ({ assert }) => {
    const held = heldPreparations()
    const starts = startsWith(held.create, 0)
    const started = Promise.all(
      ['a', 'b', 'c'].map((agentId) => starts.startOrAdopt(spec(agentId)))
    )
    await turns()
    assert.equal(held.underWay.size, 3)
    for (const finish of [...held.underWay.values()]) finish()
    await started
  })
})
