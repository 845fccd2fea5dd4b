import vine from '@vinejs/vine'

const name = () => vine.string().trim().minLength(2).maxLength(50)
const description = () => vine.string().trim().maxLength(2000).nullable().optional()
const avatarUrl = () =>
  vine
    .string()
    .trim()
    .maxLength(2048)
    .url({ protocols: ['http', 'https'], require_protocol: true })
    .nullable()
    .optional()
/** Any JSON object; the framework plugin checks its contents. */
const config = () => vine.object({}).allowUnknownProperties()

export const createAgentValidator = vine.create({
  name: name(),
  framework: vine.string().trim().minLength(1).maxLength(40),
  description: description(),
  avatarUrl: avatarUrl(),
  config: config().optional(),
})

export const updateAgentValidator = vine.create({
  name: name().optional(),
  description: description(),
  avatarUrl: avatarUrl(),
  config: config().optional(),
  commitMessage: vine.string().trim().maxLength(500).optional(),
})

/** CONTRACT.md: `page` from 1, `limit` 1 to 100 (default 20). */
export const listAgentsValidator = vine.create({
  page: vine.number().withoutDecimals().min(1).max(1_000_000).optional(),
  limit: vine.number().withoutDecimals().range([1, 100]).optional(),
})

export const listVersionsValidator = vine.create({
  limit: vine.number().withoutDecimals().range([1, 100]).optional(),
  offset: vine.number().withoutDecimals().min(0).max(1_000_000).optional(),
})

export const logsValidator = vine.create({
  // At most 1,000 lines a call (a 10,000-line tail read megabytes per request).
  tail: vine.number().withoutDecimals().range([0, 1_000]).optional(),
  stream: vine.boolean().optional(),
  token: vine.string().maxLength(512).optional(),
})

/**
 * A rule that checks nothing and only says, in the JSON Schema
 * (/openapi.json), what the runtime's resolveWorkspacePath checks on a path;
 * the runtime answers (400, or 403 for a path outside the workspace).
 */
const checkedByWorkspace = vine.createRule<{ pattern: string }>(() => {}, {
  toJSONSchema: (schema, { pattern }) => {
    if (!schema.pattern) schema.pattern = pattern
    else schema.allOf = [...(schema.allOf ?? []), { pattern }]
  },
})

/** Workspace paths: segments of at most 255 characters. */
const path = () =>
  vine
    .string()
    .maxLength(4096)
    .use(checkedByWorkspace({ pattern: '^[^/\\\\]{0,255}(?:[/\\\\]+[^/\\\\]{0,255})*$' }))

/** A path naming a file or folder, not the workspace root (empty, only separators or dots). */
const entryPath = () => path().use(checkedByWorkspace({ pattern: '[^\\s/\\\\.]' }))

export const listFilesValidator = vine.create({ path: path().optional() })
export const filePathValidator = vine.create({ path: entryPath() })
export const writeFileValidator = vine.create({
  path: entryPath(),
  content: vine.string().maxLength(1_000_000),
})
