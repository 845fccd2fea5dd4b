import type { ContainerUsage } from '#runtime/types'

/** CPU percent (of one core) and memory from one `GET /containers/{id}/stats?stream=false`. */
export function usageFromDockerStats(stats: any, memoryLimitBytes?: number): ContainerUsage {
  const cpuDelta =
    (stats?.cpu_stats?.cpu_usage?.total_usage ?? 0) -
    (stats?.precpu_stats?.cpu_usage?.total_usage ?? 0)
  const systemDelta =
    (stats?.cpu_stats?.system_cpu_usage ?? 0) - (stats?.precpu_stats?.system_cpu_usage ?? 0)
  const onlineCpus =
    stats?.cpu_stats?.online_cpus ?? stats?.cpu_stats?.cpu_usage?.percpu_usage?.length ?? 1
  const cpuPercent =
    systemDelta > 0 && cpuDelta > 0 ? (cpuDelta / systemDelta) * onlineCpus * 100 : 0
  const memory = stats?.memory_stats ?? {}
  // Page cache is reclaimable: `docker stats` leaves it out too.
  const cache =
    memory.stats?.inactive_file ?? memory.stats?.total_inactive_file ?? memory.stats?.cache ?? 0
  const usedBytes = Math.max(0, (memory.usage ?? 0) - cache)
  const limitBytes = memoryLimitBytes || memory.limit || 0
  return {
    cpuPercent: Math.round(cpuPercent * 10) / 10,
    memoryMb: Math.round((usedBytes / 1024 / 1024) * 10) / 10,
    memoryLimitMb: Math.round(limitBytes / 1024 / 1024),
  }
}
