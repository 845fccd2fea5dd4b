import vine from '@vinejs/vine'
import { chatConfig } from '#config/chat'

const turn = vine.object({
  role: vine.enum(['user', 'assistant'] as const),
  content: vine.string().maxLength(chatConfig.historyEntryMaxLength),
})

/** Spec: `message` 1 to 4000 characters, `history` at most 40 `{ role, content }` entries. */
export const chatValidator = vine.create({
  message: vine.string().trim().minLength(1).maxLength(chatConfig.messageMaxLength),
  history: vine.array(turn).maxLength(chatConfig.historyMaxEntries).optional(),
})

/** POST /agents/test-chat. */
export const testChatValidator = vine.create({
  message: vine.string().trim().minLength(1).maxLength(chatConfig.messageMaxLength),
  systemPrompt: vine.string().maxLength(20_000).optional(),
})

/** POST /agents/:id/chat/history: replaces the stored conversation (at most 200 messages). */
export const replaceHistoryValidator = vine.create({
  messages: vine
    .array(
      vine.object({
        role: vine.enum(['user', 'assistant'] as const),
        content: vine.string().minLength(1).maxLength(chatConfig.historyEntryMaxLength),
      })
    )
    .maxLength(chatConfig.storedMessagesKept),
})

/** POST /webhooks/in/:token. */
export const webhookChatValidator = vine.create({
  message: vine.string().trim().minLength(1).maxLength(chatConfig.messageMaxLength),
})
