/** What the backup routes take and answer (the source of their part of /openapi.json). */
import { backupConfig } from '#config/backups'
import { describes, t } from '#core/openapi/shapes'
import { defineContracts } from '#core/openapi/contracts'
import { ForbiddenException, ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import { agentDetailShape } from '#agents/services/agent_presenter'
import type { BackupView } from '#backups/services/backup_service'
import { createBackupValidator } from '#backups/validators/backup_validators'

const backup = t.named(
  'AgentBackup',
  describes<BackupView>()(
    t.object({
      id: t.uuid(),
      kind: t.enum(['manual', 'daily', 'pre-restore'] as const),
      size: t.integer(),
      sha256: t.string(),
      includeSecrets: t.boolean(),
      createdAt: t.string(),
    })
  )
)

/** Folders live in engine volumes on the docker and swarm drivers: backups answer 503 there. */
const agentErrors = [ForbiddenException, ServiceUnavailableException]

export default defineContracts({
  'agents.import': {
    summary: 'Import an agent',
    description:
      'An archive (a downloaded backup, from this installation or another) uploaded as multipart/form-data in the field "archive". Creates a new agent in your account (the plan\'s agent limit applies) with a new id, slug and tokens; channel connections are not carried. The archive is checked first (size, paths, links, manifest, hashes): a bad one is refused with 400 saying why and creates nothing.',
    multipart: {
      files: {
        archive: {
          description: `The backup archive (a gzip'd tar with manifest.json, as GET /agents/{id}/backups/{backupId}/download answers it), at most BACKUP_MAX_ARCHIVE_MB (${backupConfig.maxArchiveBytes} bytes here)`,
          mediaType: 'application/gzip',
        },
      },
    },
    responses: { 201: agentDetailShape },
    errors: [ServiceUnavailableException],
  },
  'agents.clone': {
    summary: 'Clone an agent',
    description:
      'A new agent of yours from this one\'s state now (a running agent is paused for the copy): new id, slug and tokens, the name with " (copy)"; channel connections are not carried. The plan\'s agent limit applies.',
    responses: { 201: agentDetailShape },
    errors: agentErrors,
  },
  'agents.backups.store': {
    summary: 'Back up an agent',
    description:
      "A point-in-time archive of the whole agent: config (secret values left out unless includeSecrets, then kept encrypted with this service's key and restorable on this installation only), workspace, framework state and sessions, memory, skills, knowledge, schedules and chat history. A running agent is paused for the copy (put to sleep, then woken). Answers the stored backup.",
    body: createBackupValidator,
    responses: { 201: backup },
    errors: agentErrors,
  },
  'agents.backups.index': {
    summary: "An agent's backups",
    description:
      'Newest first: manual ones, daily automatic ones (kept by plan: 3 on free, 14 on paid plans) and the pre-restore ones a restore saves.',
    responses: { 200: t.object({ backups: t.array(backup) }) },
    errors: agentErrors,
  },
  'agents.backups.download': {
    summary: 'Download a backup',
    description:
      'The archive itself (application/gzip: a tar with manifest.json), for POST /agents/import here or on another installation. Not wrapped in the envelope.',
    responses: {
      200: {
        description: 'The archive',
        content: { 'application/gzip': { type: 'string', format: 'binary' } },
      },
    },
    errors: agentErrors,
  },
  'agents.backups.restore': {
    summary: 'Restore a backup',
    description:
      'The agent comes back to that point: folders, config, skills, knowledge, schedules and chat history. Its current state is saved first as a pre-restore backup; its container is stopped meanwhile and started again. Channel connections stay; secret values an archive left out keep their current value.',
    responses: {
      200: t.object({
        restoredFrom: t.uuid(),
        preRestoreBackup: backup,
        agent: agentDetailShape,
      }),
    },
    errors: agentErrors,
  },
  'agents.backups.destroy': {
    summary: 'Delete a backup',
    responses: { 200: t.object({ deleted: t.boolean() }) },
    errors: agentErrors,
  },
})
