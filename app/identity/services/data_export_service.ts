import { createWriteStream } from 'node:fs'
import { mkdir, rename, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { DateTime } from 'luxon'
import yazl from 'yazl'
import app from '@adonisjs/core/services/app'
import logger from '@adonisjs/core/services/logger'
import db from '@adonisjs/lucid/services/db'
import { signedUrlFor } from '@adonisjs/core/services/url_builder'
import { appUrl } from '#config/app'
import { storageDir } from '#core/bootstrap/paths'
import {
  RateLimitExceededException,
  ForbiddenException,
  GoneException,
  NotFoundException,
} from '#core/exceptions/api_exceptions'
import DataExport from '#identity/models/data_export'
import User from '#identity/models/user'
import { exportReadyMail } from '#identity/mails/account_mails'
import { exportSections, maskSecretFields } from '#identity/services/export_sections'
import { isUuid } from '#core/http/ids'
import { sendMailInBackground } from '#identity/services/mailer'
import { notify } from '#identity/services/notification_service'

/** Spec: the download link is valid 7 days. */
const LINK_TTL_DAYS = 7
/** A job still "processing" after this long died with its process. */
const STALE_AFTER_MINUTES = 30
const SIGNATURE_PURPOSE = 'data-export'
const PG_UNIQUE_VIOLATION = '23505'

export const DOWNLOAD_ROUTE = '/auth/export-data/:id/download'

function exportsDir(): string {
  return join(storageDir(app.appRoot), 'exports')
}

export function exportFilePath(entry: DataExport): string {
  return join(exportsDir(), entry.fileName ?? `${entry.id}.zip`)
}

/** The mailed link: signed (purpose-bound, expires in 7 days). */
export function downloadLink(exportId: string): string {
  // A route pattern (not a name), so the generated route types need not know it.
  const signPattern = signedUrlFor as unknown as (
    pattern: string,
    params: Record<string, string>,
    options: Record<string, unknown>
  ) => string
  return signPattern(
    DOWNLOAD_ROUTE,
    { id: exportId },
    {
      disableRouteLookup: true,
      expiresIn: `${LINK_TTL_DAYS}d`,
      purpose: SIGNATURE_PURPOSE,
      prefixUrl: appUrl,
    }
  )
}

export const EXPORT_SIGNATURE_PURPOSE = SIGNATURE_PURPOSE

/** A new export may be asked for an hour after the last one was sent. */
const RESEND_AFTER_MINUTES = 60

function alreadyPreparing() {
  return RateLimitExceededException.retryAfter('A data export is already being prepared', 60)
}

/**
 * POST /auth/export-data: records the job and starts it in the background.
 * One export at a time per user, and none within an hour of the last one
 * sent: 429 with Retry-After. The check and the new job's row are one
 * step per user (a transaction-scoped advisory lock), and the check looks
 * for a processing job as well as a recent ready one: the job leaves
 * "processing" for "ready" without that lock, so a check for ready jobs
 * alone could see the first job processing, and an insert just after it
 * turned ready would pass the partial unique index on processing jobs
 * (that index stays as the last guard).
 */
export async function requestExport(user: User) {
  const entry = await db.transaction(async (trx) => {
    await trx.rawQuery('select pg_advisory_xact_lock(hashtextextended(?, 0))', [
      `data-export:${user.id}`,
    ])
    await DataExport.query({ client: trx })
      .where('user_id', user.id)
      .where('status', 'processing')
      .where('created_at', '<', DateTime.now().minus({ minutes: STALE_AFTER_MINUTES }).toJSDate())
      .update({ status: 'failed', error: 'interrupted' })

    const sentAfter = DateTime.now().minus({ minutes: RESEND_AFTER_MINUTES }).toJSDate()
    const blocking = await DataExport.query({ client: trx })
      .where('user_id', user.id)
      .where((query) =>
        query
          .where('status', 'processing')
          .orWhere((ready) => ready.where('status', 'ready').where('created_at', '>', sentAfter))
      )
      .orderBy('created_at', 'desc')
    if (blocking.some((job) => job.status === 'processing')) throw alreadyPreparing()
    if (blocking.length > 0) {
      const waitMs =
        blocking[0].createdAt.plus({ minutes: RESEND_AFTER_MINUTES }).toMillis() - Date.now()
      throw RateLimitExceededException.retryAfter(
        'A data export was sent in the last hour; check your mail or try again later',
        waitMs / 1000
      )
    }
    try {
      return await DataExport.create({ userId: user.id, status: 'processing' }, { client: trx })
    } catch (error) {
      if ((error as { code?: string }).code === PG_UNIQUE_VIOLATION) throw alreadyPreparing()
      throw error
    }
  })

  setImmediate(() => {
    void runExport(entry.id)
  })
  return {
    status: 'processing' as const,
    message: 'Your data export is being prepared; a download link will be e-mailed to you.',
  }
}

async function writeZip(entry: DataExport): Promise<{ fileName: string; size: number }> {
  const zip = new yazl.ZipFile()
  const names: string[] = []
  const mtime = new Date()
  for (const [name, collect] of exportSections.entries()) {
    const data = maskSecretFields(await collect(entry.userId))
    zip.addBuffer(Buffer.from(JSON.stringify(data, null, 2)), `${name}.json`, { mtime })
    names.push(name)
  }
  const manifest = {
    userId: entry.userId,
    exportId: entry.id,
    generatedAt: mtime.toISOString(),
    sections: names.map((name) => `${name}.json`),
    note: 'Secrets (passwords, API keys, tokens, provider keys) are never exported; such fields read "***".',
  }
  zip.addBuffer(Buffer.from(JSON.stringify(manifest, null, 2)), 'manifest.json', { mtime })
  zip.end()

  await mkdir(exportsDir(), { recursive: true })
  const fileName = `${entry.id}.zip`
  const partial = join(exportsDir(), `${fileName}.partial`)
  await pipeline(zip.outputStream, createWriteStream(partial, { mode: 0o600 }))
  await rename(partial, join(exportsDir(), fileName))
  const { size } = await stat(join(exportsDir(), fileName))
  return { fileName, size }
}

/** The background job: ZIP, then mail the signed link and notify. */
export async function runExport(exportId: string): Promise<void> {
  const entry = await DataExport.find(exportId)
  if (!entry || entry.status !== 'processing') return
  const user = await User.find(entry.userId)
  if (!user) return

  try {
    const { fileName, size } = await writeZip(entry)
    const expiresAt = DateTime.now().plus({ days: LINK_TTL_DAYS })
    entry.merge({
      status: 'ready',
      fileName,
      sizeBytes: size,
      completedAt: DateTime.now(),
      expiresAt,
    })
    await entry.save()
    await notify(user.id, {
      type: 'export_ready',
      title: 'Your data export is ready',
      body: 'A download link valid for 7 days was sent to your e-mail address.',
    })
    await sendMailInBackground(
      exportReadyMail(user.email, downloadLink(entry.id), expiresAt.toJSDate())
    )
  } catch (error) {
    logger.error({ err: error, exportId }, 'data export failed')
    entry.merge({ status: 'failed', error: 'export failed' })
    await entry.save().catch(() => {})
    await rm(join(exportsDir(), `${entry.id}.zip.partial`), { force: true }).catch(() => {})
    await notify(user.id, {
      type: 'export_failed',
      title: 'Your data export failed',
      body: 'Please request a new export; contact support if it fails again.',
    }).catch(() => {})
  }
}

/**
 * The export behind a valid signed link, for its owner only: another
 * signed-in user gets 403; an export that expired or is gone gets 410.
 */
export async function downloadableExport(exportId: string, user: User): Promise<DataExport> {
  const entry = isUuid(exportId) ? await DataExport.find(exportId) : null
  if (!entry) throw new NotFoundException('Export not found')
  if (entry.userId !== user.id)
    throw new ForbiddenException('This export belongs to another account')
  if (entry.status !== 'ready' || !entry.expiresAt || entry.expiresAt <= DateTime.now()) {
    throw new GoneException('This export is no longer available; request a new one')
  }
  try {
    await stat(exportFilePath(entry))
  } catch {
    throw new GoneException('This export is no longer available; request a new one')
  }
  return entry
}
