import { createWriteStream } from 'node:fs'
import { join } from 'node:path'
import { Transform } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { HttpContext } from '@adonisjs/core/http'
import { backupConfig } from '#config/backups'
import { ValidationException } from '#core/exceptions/api_exceptions'
import { findAgent } from '#agents/services/agent_access'
import AgentPolicy from '#agents/policies/agent_policy'
import { agentFromArchive, cloneAgent } from '#backups/services/agent_import'
import {
  createBackup,
  deleteBackup,
  findBackup,
  listBackups,
  restoreBackup,
} from '#backups/services/backup_service'
import { archivePath, withWorkFolder } from '#backups/services/backup_store'
import { createBackupValidator } from '#backups/validators/backup_validators'

/** The multipart field that carries the archive of POST /agents/import. */
const ARCHIVE_FIELD = 'archive'

/**
 * Writes the uploaded archive (multipart field `archive`) to `target`,
 * refusing with 400 one larger than BACKUP_MAX_ARCHIVE_MB as it arrives.
 */
async function receiveArchive(request: HttpContext['request'], target: string): Promise<void> {
  const multipart = request.multipart
  if (!request.is(['multipart/form-data']) || !multipart) {
    throw new ValidationException(
      `Send the archive as multipart/form-data in the field "${ARCHIVE_FIELD}"`
    )
  }
  const limit = backupConfig.maxArchiveBytes
  let failure: unknown
  let received = false
  multipart.onFile(ARCHIVE_FIELD, {}, async (part) => {
    received = true
    let size = 0
    const cap = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        size += chunk.length
        if (size > limit) {
          callback(
            new ValidationException(`The archive was refused: it is larger than ${limit} bytes`)
          )
        } else {
          callback(null, chunk)
        }
      },
    })
    try {
      await pipeline(part, cap, createWriteStream(target, { flags: 'wx', mode: 0o600 }))
    } catch (error) {
      failure = error
      multipart.abort(error)
    }
  })
  try {
    await multipart.process()
  } catch (error) {
    throw failure ?? error
  }
  if (failure) throw failure
  if (!received) {
    throw new ValidationException(`The field "${ARCHIVE_FIELD}" must hold the archive file`)
  }
}

/** Agent backups, import, clone (docs/backups.md). */
export default class BackupsController {
  /**
   * @store
   * @summary Back up an agent
   * @description A point-in-time archive of the whole agent: config (secret values left out unless includeSecrets, then kept encrypted with this service's key and restorable on this installation only), workspace, framework state and sessions, memory, skills, knowledge, schedules and chat history. A running agent is paused for the copy (put to sleep, then woken). Answers the stored backup.
   * @requestBody {"includeSecrets":false}
   * @responseBody 201 - {"success":true,"data":{"id":"0c1d...","kind":"manual","size":48213,"sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","includeSecrets":false,"createdAt":"2025-01-01T00:00:00.000Z"}}
   */
  async store({ bouncer, params, request, response }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    const input = await request.validateUsing(createBackupValidator)
    const backup = await createBackup(agent, 'manual', { includeSecrets: input.includeSecrets })
    response.status(201)
    return backup
  }

  /**
   * @index
   * @summary An agent's backups
   * @description Newest first: manual ones, daily automatic ones (kept by plan: 3 on free, 14 on paid plans) and the pre-restore ones a restore saves.
   * @responseBody 200 - {"success":true,"data":{"backups":[{"id":"0c1d...","kind":"daily","size":48213,"sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","includeSecrets":false,"createdAt":"2025-01-01T00:00:00.000Z"}]}}
   */
  async index({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return { backups: await listBackups(agent.id) }
  }

  /**
   * @download
   * @summary Download a backup
   * @description The archive itself (application/gzip: a tar with manifest.json), for POST /agents/import here or on another installation. Not wrapped in the envelope.
   * @responseBody 200 - <application/gzip>
   */
  async download({ bouncer, params, response }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    const backup = await findBackup(agent.id, params.backupId)
    const day = backup.createdAt.slice(0, 10)
    response.header('content-type', 'application/gzip')
    response.header('x-content-sha256', backup.sha256)
    response.attachment(archivePath(agent.id, backup.id), `${agent.slug}-${day}.agent.tar.gz`)
  }

  /**
   * @restore
   * @summary Restore a backup
   * @description The agent comes back to that point: folders, config, skills, knowledge, schedules and chat history. Its current state is saved first as a pre-restore backup; its container is stopped meanwhile and started again. Channel connections stay; secret values an archive left out keep their current value.
   * @responseBody 200 - {"success":true,"data":{"restoredFrom":"0c1d...","preRestoreBackup":{"id":"7a8b...","kind":"pre-restore","size":50120,"sha256":"2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae","includeSecrets":false,"createdAt":"2025-01-02T00:00:00.000Z"},"agent":{"id":"9b2f...","name":"Support Bot","slug":"support-bot-x7k2qa","status":"active","framework":"openclaw","messageCount":12,"createdAt":"2025-01-01T00:00:00.000Z","description":null,"avatarUrl":null,"config":{"personality":"Friendly"},"integrations":[],"lastActiveAt":null,"updatedAt":"2025-01-02T00:00:00.000Z"}}}
   * @nullable description, avatarUrl, lastActiveAt
   */
  async restore({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return restoreBackup(agent, params.backupId)
  }

  /**
   * @destroy
   * @summary Delete a backup
   * @responseBody 200 - {"success":true,"data":{"deleted":true}}
   */
  async destroy({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return deleteBackup(agent.id, params.backupId)
  }

  /**
   * @import
   * @summary Import an agent
   * @description multipart/form-data with the archive in the field "archive" (a downloaded backup, from this installation or another). Creates a new agent in your account (the plan's agent limit applies) with a new id, slug and tokens; channel connections are not carried. The archive is checked first (size, paths, links, manifest, hashes): a bad one is refused with 400 saying why and creates nothing.
   * @requestFormDataBody {"archive":{"type":"string","format":"binary"}}
   * @responseBody 201 - {"success":true,"data":{"id":"4d5e...","name":"Support Bot","slug":"support-bot-p3q9rz","status":"active","framework":"openclaw","messageCount":0,"createdAt":"2025-01-03T00:00:00.000Z","description":null,"avatarUrl":null,"config":{"personality":"Friendly"},"integrations":[],"lastActiveAt":null,"updatedAt":"2025-01-03T00:00:00.000Z"}}
   * @nullable description, avatarUrl, lastActiveAt
   */
  async import({ auth, request, response }: HttpContext) {
    const user = auth.getUserOrFail()
    const agent = await withWorkFolder(async (folder) => {
      const archive = join(folder, 'upload.tar.gz')
      await receiveArchive(request, archive)
      return agentFromArchive(user, archive)
    })
    response.status(201)
    return agent
  }

  /**
   * @clone
   * @summary Clone an agent
   * @description A new agent of yours from this one's state now (a running agent is paused for the copy): new id, slug and tokens, the name with " (copy)"; channel connections are not carried. The plan's agent limit applies.
   * @responseBody 201 - {"success":true,"data":{"id":"4d5e...","name":"Support Bot (copy)","slug":"support-bot-copy-p3q9rz","status":"active","framework":"openclaw","messageCount":0,"createdAt":"2025-01-03T00:00:00.000Z","description":null,"avatarUrl":null,"config":{"personality":"Friendly"},"integrations":[],"lastActiveAt":null,"updatedAt":"2025-01-03T00:00:00.000Z"}}
   * @nullable description, avatarUrl, lastActiveAt
   */
  async clone({ auth, bouncer, params, response }: HttpContext) {
    const source = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', source)
    const agent = await cloneAgent(auth.getUserOrFail(), source)
    response.status(201)
    return agent
  }
}
