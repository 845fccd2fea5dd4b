import { defineConfig } from '@adonisjs/core/bodyparser'

/**
 * Request bodies. The JSON limit covers the largest legitimate body in the
 * spec (a 500 KB knowledge file, JSON-escaped); anything larger is refused
 * with 413 by the error handler.
 */
const bodyParserConfig = defineConfig({
  allowedMethods: ['POST', 'PUT', 'PATCH', 'DELETE'],
  form: {
    convertEmptyStringsToNull: true,
    types: ['application/x-www-form-urlencoded'],
  },
  json: {
    encoding: 'utf-8',
    // The largest route class (container file writes); smaller classes are held
    // to their own limit by app/core/http/body_limit_middleware.ts.
    limit: '6mb',
    strict: true,
    convertEmptyStringsToNull: false,
    // JSON strings arrive as sent: knowledge, container files and model
    // prompts are stored and forwarded byte for byte (sizes are UTF-8 bytes
    // of what was sent). Fields that want trimming say so in their validator.
    trimWhitespaces: false,
    types: [
      'application/json',
      'application/json-patch+json',
      'application/vnd.api+json',
      'application/csp-report',
    ],
  },
  multipart: {
    autoProcess: true,
    convertEmptyStringsToNull: true,
    // Agent archives stream to disk under their own cap (app/backups).
    processManually: ['/agents/import'],
    fieldsLimit: '1mb',
    limit: '2mb',
    types: ['multipart/form-data'],
  },
})

export default bodyParserConfig
