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
  async store({ bouncer, params, request, response }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    const input = await request.validateUsing(createBackupValidator)
    const backup = await createBackup(agent, 'manual', { includeSecrets: input.includeSecrets })
    response.status(201)
    return backup
  }

  async index({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return { backups: await listBackups(agent.id) }
  }

  async download({ bouncer, params, response }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    const backup = await findBackup(agent.id, params.backupId)
    const day = backup.createdAt.slice(0, 10)
    response.header('content-type', 'application/gzip')
    response.header('x-content-sha256', backup.sha256)
    response.attachment(archivePath(agent.id, backup.id), `${agent.slug}-${day}.agent.tar.gz`)
  }

  async restore({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return restoreBackup(agent, params.backupId)
  }

  async destroy({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return deleteBackup(agent.id, params.backupId)
  }

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

  async clone({ auth, bouncer, params, response }: HttpContext) {
    const source = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', source)
    const agent = await cloneAgent(auth.getUserOrFail(), source)
    response.status(201)
    return agent
  }
}
