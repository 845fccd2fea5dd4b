/**
 * Log paths whose values never reach a log line: credentials in headers,
 * cookies, and any field named like a password, key, token or secret at the
 * depths our log objects use.
 */
const SECRET_FIELDS = [
  'password',
  'passwordConfirmation',
  'token',
  'refreshToken',
  'accessToken',
  'apiKey',
  'api_key',
  'key',
  'secret',
  'authorization',
  'cookie',
  'txSignature',
  'signature',
  'privateKey',
  'botToken',
  'MODEL_API_KEY',
  'APP_KEY',
]

const HEADER_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'res.headers["set-cookie"]',
  'headers.authorization',
  'headers.cookie',
  'request.headers.authorization',
  'request.headers.cookie',
]

export const REDACTED_LOG_PATHS = [
  ...HEADER_PATHS,
  ...SECRET_FIELDS.flatMap((field) => [field, `*.${field}`, `*.*.${field}`, `*.*.*.${field}`]),
]
