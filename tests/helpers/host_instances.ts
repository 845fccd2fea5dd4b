/**
 * Several instances of the service on one host, as a process manager's
 * cluster mode starts them: the same checkout, STORAGE_DIR, DATABASE_URL
 * and REDIS_URL (a PostgreSQL and a Redis of the test's own), each its own
 * server process and port. `instances[i]` is a ServiceUnderFault view of
 * the i-th: calls, kill -9, restart on the same storage and database.
 *
 *   const host = await startHostInstances(2, { MODEL_API_URL: ... })
 *   const token = await host.instances[0].signUp()
 *   await host.instances[1].call('/agents', { token })
 *   await host.destroy()
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { serviceOn, type ServiceUnderFault } from '#tests/helpers/service_under_fault'
import { startThrowawayPostgres, type ThrowawayPostgres } from '#tests/helpers/throwaway_postgres'
import { startThrowawayRedis, type ThrowawayRedis } from '#tests/helpers/throwaway_redis'
import { agentProcesses } from '#tests/helpers/agent_processes'

export interface HostInstances {
  postgres: ThrowawayPostgres
  redis: ThrowawayRedis
  storage: string
  instances: ServiceUnderFault[]
  /** Pids of every process of this host's agents, by agent id. */
  agentProcesses(): Map<string, number[]>
  /** One SQL statement on the shared database. */
  query(sql: string, values?: unknown[]): Promise<any[]>
  /** A verified account (through the first instance) whose plan allows many agents; its JWT. */
  account(): Promise<string>
  destroy(): Promise<void>
}

export async function startHostInstances(
  count: number,
  env: Record<string, string | undefined> = {}
): Promise<HostInstances> {
  const [postgres, redis] = await Promise.all([startThrowawayPostgres(), startThrowawayRedis()])
  const storage = mkdtempSync(join(tmpdir(), 'host-instances-'))
  const shared = { LOG_LEVEL: 'info', ...env, REDIS_URL: redis.url }
  const instances: ServiceUnderFault[] = []
  const host: HostInstances = {
    postgres,
    redis,
    storage,
    instances,
    agentProcesses: () => agentProcesses(join(storage, 'agents')),
    query: (sql, values) => instances[0].query(sql, values),
    async account() {
      const { token, email } = await instances[0].signUpAccount()
      await host.query(`update users set tier = 'founding_member' where email = $1`, [email])
      return token
    },
    async destroy() {
      // HOST_INSTANCES_LOG=<dir>: each instance's output is kept there (to look into a failure).
      const keep = process.env.HOST_INSTANCES_LOG
      if (keep) {
        for (const [index, instance] of instances.entries()) {
          writeFileSync(join(keep, `instance-${index}.log`), instance.server.output())
        }
      }
      // Together: the last one standing stops what the others handed over to it.
      await Promise.allSettled(instances.map((instance) => instance.destroy()))
      await Promise.allSettled([postgres.destroy(), redis.destroy()])
      rmSync(storage, { recursive: true, force: true })
    },
  }
  try {
    // One after the other: the first applies the migrations, the others find them done.
    for (let i = 0; i < count; i++)
      instances.push(await serviceOn({ postgres, storage, env: shared }))
  } catch (error) {
    await host.destroy()
    throw error
  }
  return host
}
