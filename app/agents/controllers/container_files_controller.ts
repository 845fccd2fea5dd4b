import type { HttpContext } from '@adonisjs/core/http'
import AgentPolicy from '#agents/policies/agent_policy'
import { findAgent } from '#agents/services/agent_access'
import { filesOf } from '#agents/services/agent_views'
import {
  filePathValidator,
  listFilesValidator,
  writeFileValidator,
} from '#agents/validators/agent_validators'

/** Entries one folder listing answers (a folder of 100,000 files would be a multi-megabyte answer). */
export const FILE_LIST_MAX = 1_000

/**
 * The agent's workspace (File Manager). Paths resolve inside the workspace
 * only: `..`, absolute paths outside it, symlinks out, NUL bytes and their
 * encoded forms answer 403 FORBIDDEN. 409 AGENT_NOT_RUNNING when the
 * container is not running.
 */
export default class ContainerFilesController {
  async index({ bouncer, params, request, response }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    const { path } = await request.validateUsing(listFilesValidator)
    const files = await filesOf(agent)
    const entries = await files.list(path ?? '/')
    if (entries.length <= FILE_LIST_MAX) return { files: entries }
    // The body keeps the spec's shape; the headers say it was cut.
    response.header('X-Truncated', 'true')
    response.header('X-Total-Count', String(entries.length))
    return { files: entries.slice(0, FILE_LIST_MAX) }
  }

  async read({ bouncer, params, request }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    const { path } = await request.validateUsing(filePathValidator)
    const files = await filesOf(agent)
    return files.read(path)
  }

  async write({ bouncer, params, request }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    const { path, content } = await request.validateUsing(writeFileValidator)
    const files = await filesOf(agent)
    return files.write(path, content)
  }

  async destroy({ bouncer, params, request }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    const { path } = await request.validateUsing(filePathValidator)
    const files = await filesOf(agent)
    return files.delete(path)
  }
}
