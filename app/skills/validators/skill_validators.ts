import vine from '@vinejs/vine'

/** POST /agents/:id/skills/install and /uninstall: `{ skillId }`, a catalogue id. */
export const skillIdValidator = vine.create({
  skillId: vine
    .string()
    .trim()
    .minLength(1)
    .maxLength(64)
    .regex(/^[a-z0-9]+(?:-[a-z0-9]+)*$/),
})
