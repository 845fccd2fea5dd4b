import vine from '@vinejs/vine'

export const createBackupValidator = vine.create({
  /** Keep secret config values (encrypted with this install's key); left out by default. */
  includeSecrets: vine.boolean().optional(),
})
