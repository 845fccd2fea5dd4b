import vine from '@vinejs/vine'

/** POST pair-channel and disconnect-channel: `{ channel }`; the service checks it is installed. */
export const channelNameValidator = vine.create({
  channel: vine.string().trim().minLength(1).maxLength(40),
})
