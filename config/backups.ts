import env from '#start/env'
import type { TierKey } from '#config/plans'

/**
 * Agent backups (docs/backups.md). BACKUP_MAX_ARCHIVE_MB caps an uploaded
 * archive as sent (compressed), BACKUP_MAX_UNPACKED_MB what it may unpack
 * to (so a small archive cannot fill the disk); BACKUP_DAILY=off turns
 * the daily automatic backups off. Tests lower the caps on this object.
 */
function positive(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : fallback
}

const MB = 1024 * 1024

export const backupConfig = {
  maxArchiveBytes: positive(env.get('BACKUP_MAX_ARCHIVE_MB'), 2048) * MB,
  maxUnpackedBytes: positive(env.get('BACKUP_MAX_UNPACKED_MB'), 4096) * MB,
  /** Files and folders one archive may hold. */
  maxEntries: 200_000,
  daily: env.get('BACKUP_DAILY') !== 'off',
  /** How often the daily job looks for agents whose last daily backup is a day old. */
  dailyCheckEveryMs: 60 * 60 * 1000,
  /** Daily backups kept per agent, by the owner's plan (manual ones are kept until deleted). */
  dailyKept: {
    free: 3,
    starter: 14,
    pro: 14,
    business: 14,
    founding_member: 14,
  } satisfies Record<TierKey, number>,
  /** Pre-restore backups kept per agent (the newest; older ones go). */
  preRestoreKept: 3,
  /** Manual backups one agent may hold at once. */
  manualKept: 20,
}
