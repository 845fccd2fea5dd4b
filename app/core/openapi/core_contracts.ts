/** What the core routes take and answer (the source of their part of /openapi.json). */
import { envelopeSchema, t } from '#core/openapi/shapes'
import { defineContracts } from '#core/openapi/contracts'
import { NotFoundException, ServiceUnavailableException } from '#core/exceptions/api_exceptions'

export default defineContracts({
  'landing': {
    summary: 'Service entry point',
    description:
      'A browser (Accept: text/html first) gets a small HTML page with links to the API documentation, the staff console and the health check; any other client gets these links as JSON.',
    responses: {
      200: {
        description: 'The links, as JSON or (for a browser) as an HTML page',
        content: {
          'application/json': envelopeSchema(
            t.object({
              service: t.string(),
              docs: t.string(),
              openapi: t.string(),
              console: t.string(),
              health: t.string(),
            })
          ),
          'text/html': { type: 'string' },
        },
      },
    },
  },
  'health': {
    summary: 'Service health',
    description:
      '200 once the database answers and migrations are applied; 503 otherwise. No credential needed.',
    responses: {
      200: t.object({
        status: t.string(),
        database: t.string(),
        migrations: t.string(),
        uptimeSecs: t.integer(),
      }),
    },
    errors: [ServiceUnavailableException],
  },
  'openapi.document': {
    summary: 'OpenAPI document',
    description:
      "The machine-readable description of every route (OpenAPI 3.1), generated from the live router and each route's contract (its validators and answer shapes). Not wrapped in the envelope. No credential needed.",
    tag: 'docs',
    responses: {
      200: {
        description: 'This OpenAPI 3.1 document, not wrapped in the envelope',
        content: { 'application/json': { type: 'object', required: ['openapi'] } },
      },
    },
  },
  'docs.explorer': {
    summary: 'Interactive API explorer',
    description:
      'Swagger UI over /openapi.json; its files are served by this service, so it works offline. No credential needed.',
    tag: 'docs',
    responses: {
      200: {
        description: 'Interactive explorer (Swagger UI) for /openapi.json',
        content: { 'text/html': { type: 'string' } },
      },
    },
  },
  'docs.asset': {
    summary: 'Explorer file',
    description: 'Stylesheet, scripts and icon of the explorer (from swagger-ui-dist).',
    tag: 'docs',
    parameters: { file: 'File name, e.g. swagger-ui.css' },
    responses: {
      200: {
        description: 'A static file of the explorer',
        content: { '*/*': { type: 'string', format: 'binary' } },
      },
    },
    errors: [NotFoundException],
  },
})
