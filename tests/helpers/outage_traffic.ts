import { setTimeout as sleep } from 'node:timers/promises'

/** One request of the steady traffic: its status (or how it failed), how long it took, when it ended. */
export interface TrafficAnswer {
  status: number | 'no answer'
  ms: number
  at: number
}

/**
 * Keeps sending requests one after the other (cycling through `requests`,
 * `intervalMs` apart) until stopped, as clients of a service keep doing
 * through an outage: the answers say how many failed and how long each took.
 * Each request should carry its own client-side timeout, so a hang ends as
 * 'no answer' instead of stalling the test.
 */
export function steadyTraffic(
  requests: Array<() => Promise<{ status: number }>>,
  intervalMs = 100
) {
  const answers: TrafficAnswer[] = []
  let running = true
  const loop = (async () => {
    for (let i = 0; running; i++) {
      const started = Date.now()
      const status = await requests[i % requests.length]()
        .then((answer) => answer.status)
        .catch(() => 'no answer' as const)
      answers.push({ status, ms: Date.now() - started, at: Date.now() })
      await sleep(intervalMs)
    }
  })()
  return {
    answers,
    async stop(): Promise<TrafficAnswer[]> {
      running = false
      await loop
      return answers
    },
  }
}

/** "12 failed (503) in 7-41 ms" for the report line of an outage test. */
export function describeFailures(answers: TrafficAnswer[], failed: (a: TrafficAnswer) => boolean) {
  const failures = answers.filter(failed)
  if (failures.length === 0) return 'none failed'
  const times = failures.map((answer) => answer.ms)
  const statuses = [...new Set(failures.map((answer) => answer.status))].join('/')
  return `${failures.length} failed (${statuses}) in ${Math.min(...times)}-${Math.max(...times)} ms`
}
