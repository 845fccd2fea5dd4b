import { mkdir, readFile } from 'node:fs/promises'
import { writeFileAtomic } from '#core/files/atomic_file'
import { join } from 'node:path'
import { agentPaths } from '#runtime/agent_paths'

/** What the driver remembers of an agent between calls (runtime/docker.json). */
export interface DockerRecord {
  framework: string
  statePath: string
  workspacePath: string
  containerPort: number
  owner: { uid: number; gid: number }
  /** Stopped on purpose: an exited container is `stopped`, not `error`. */
  stoppedByUser: boolean
}

export function parseOwner(user: string | undefined): { uid: number; gid: number } {
  const [uid, gid] = (user ?? '').split(':').map(Number)
  return {
    uid: Number.isInteger(uid) ? uid : 0,
    gid: Number.isInteger(gid) ? gid : Number.isInteger(uid) ? uid : 0,
  }
}

function recordFile(agentsDir: string, agentId: string) {
  return join(agentPaths(agentsDir, agentId).runtime, 'docker.json')
}

export async function readDockerRecord(
  agentsDir: string,
  agentId: string
): Promise<DockerRecord | undefined> {
  try {
    return JSON.parse(await readFile(recordFile(agentsDir, agentId), 'utf8')) as DockerRecord
  } catch {
    return undefined
  }
}

export async function writeDockerRecord(agentsDir: string, agentId: string, record: DockerRecord) {
  const file = recordFile(agentsDir, agentId)
  await mkdir(join(file, '..'), { recursive: true, mode: 0o700 })
  await writeFileAtomic(file, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 })
}
