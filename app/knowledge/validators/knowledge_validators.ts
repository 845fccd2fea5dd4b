import vine from '@vinejs/vine'

/** POST /agents/:id/knowledge: sizes and the filename's form are checked by the service. */
export const uploadKnowledgeValidator = vine.create({
  filename: vine.string().trim().minLength(1).maxLength(255),
  content: vine.string(),
})
