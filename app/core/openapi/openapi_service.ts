import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import app from '@adonisjs/core/services/app'
import logger from '@adonisjs/core/services/logger'
import router from '@adonisjs/core/services/router'
import type { RouteJSON } from '@adonisjs/core/types/http'
import * as apiExceptions from '#core/exceptions/api_exceptions'
import { runAutoswagger, type EngineOutput } from '#core/openapi/autoswagger_engine'
import { DocumentBuilder } from '#core/openapi/document_builder'
import type { Schema } from '#core/openapi/schema_tools'

/** Route names of this area, used to give its non-JSON answers their real content type. */
export const OPENAPI_ROUTES = {
  document: 'openapi.document',
  explorer: 'docs.explorer',
  asset: 'docs.asset',
} as const

/** Test-only routes (NODE_ENV=test) are not part of the interface. */
/** Not part of the JSON API: test-only routes, the staff console (HTML), its live events, the favicon. */
const EXCLUDED_PREFIXES = ['/__test', '/console', '/__transmit', '/favicon.ico']

/** swagger-ui-dist files the explorer page loads, served from node_modules (works offline). */
const EXPLORER_ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
}

const errorEnvelope = (description: string): Schema => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } },
})

const RESPONSE_OVERRIDES: Record<string, Record<string, Schema>> = {
  // Streams: the example in the JSDoc can only say text/plain (found by the fuzz).
  'agents.chat.stream': {
    200: {
      description:
        'Server-sent events: `data: {"token": "..."}` per chunk, then `data: [DONE]` (an error after the start: `data: {"error": "..."}`, then `data: [DONE]`)',
      content: { 'text/event-stream': { schema: { type: 'string' } } },
    },
    400: errorEnvelope('Invalid input (VALIDATION_ERROR)'),
    401: errorEnvelope('Missing or invalid credential (AUTH_REQUIRED)'),
  },
  'agents.logs': {
    200: {
      description:
        'The last `tail` lines as plain text; with stream=true a live event stream, one `data:` event per line',
      content: {
        'text/plain': { schema: { type: 'string' } },
        'text/event-stream': { schema: { type: 'string' } },
      },
    },
    400: errorEnvelope('Invalid input (VALIDATION_ERROR)'),
    401: errorEnvelope('Missing or invalid credential (AUTH_REQUIRED)'),
  },
  [OPENAPI_ROUTES.document]: {
    200: {
      description: 'This OpenAPI 3.1 document, not wrapped in the envelope',
      content: { 'application/json': { schema: { type: 'object', required: ['openapi'] } } },
    },
  },
  [OPENAPI_ROUTES.explorer]: {
    200: {
      description: 'Interactive explorer (Swagger UI) for /openapi.json',
      content: { 'text/html': { schema: { type: 'string' } } },
    },
  },
  [OPENAPI_ROUTES.asset]: {
    200: {
      description: 'A static file of the explorer',
      content: { '*/*': { schema: { type: 'string', format: 'binary' } } },
    },
    404: {
      description: 'No such explorer file (NOT_FOUND)',
      content: {
        'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } },
      },
    },
  },
}

/** True for routes the JSON API document leaves out (test-only routes, the console). */
export function isExcluded(pattern: string): boolean {
  return EXCLUDED_PREFIXES.some((prefix) => pattern === prefix || pattern.startsWith(`${prefix}/`))
}

/** Every `code` the exception handler can send: one per typed exception, plus SERVER_ERROR. */
function errorCodes(): string[] {
  const codes = ['SERVER_ERROR']
  for (const value of Object.values(apiExceptions)) {
    if (typeof value !== 'function' || !(value.prototype instanceof apiExceptions.ApiException)) {
      continue
    }
    const Exception = value as unknown as new () => apiExceptions.ApiException
    codes.push(new Exception().apiCode)
  }
  return codes
}

/**
 * Builds the OpenAPI document of the live router with adonis-autoswagger (see
 * autoswagger_engine and document_builder), once: the first request pays for
 * it, later ones get the cached document. Routes are all registered at boot,
 * so a document built after boot is complete.
 */
export class OpenApiService {
  #document: Promise<string> | null = null

  /** The serialized document (JSON text), built on first use. */
  document(): Promise<string> {
    if (!this.#document) {
      this.#document = this.#build().catch((error) => {
        this.#document = null // let the next request try again
        throw error
      })
    }
    return this.#document
  }

  /** The routes the document describes: every route of the live router but the test-only ones. */
  documentedRoutes(): RouteJSON[] {
    return (router.toJSON().root ?? []).filter((route) => !isExcluded(route.pattern))
  }

  /**
   * Folder holding the TypeScript sources autoswagger reads annotations and
   * models from: the app root in development and tests; its parent when the
   * built server runs from build/ inside the checkout (`npm start`).
   */
  sourceRoot(): string | null {
    const runtimeRoot = fileURLToPath(app.appRoot)
    for (const candidate of [runtimeRoot, join(runtimeRoot, '..')]) {
      if (existsSync(join(candidate, 'app', 'core', 'openapi', 'openapi_service.ts'))) {
        return candidate
      }
    }
    return null
  }

  async #build(): Promise<string> {
    const started = performance.now()
    const sourceRoot = this.sourceRoot()
    const runtimeRoot = fileURLToPath(app.appRoot)
    if (!sourceRoot) {
      logger.warn('OpenAPI: TypeScript sources not found; describing routes without annotations')
    }
    const routes = this.documentedRoutes()
    const info = this.#info(runtimeRoot)
    const input = {
      routes,
      sourceRoot,
      runtimeRoot,
      ignore: EXCLUDED_PREFIXES.map((prefix) => `${prefix}/*`),
      info,
    }
    let engine: EngineOutput
    try {
      engine = await runAutoswagger(input)
    } catch (error) {
      // A bug in autoswagger's annotation parsing must not hide the API: fall
      // back to what the router alone says (every route, params, security).
      logger.error({ err: error }, 'OpenAPI: annotations could not be read; serving routes only')
      engine = await runAutoswagger({ ...input, sourceRoot: null })
    }
    const { document, warnings } = new DocumentBuilder({
      routes,
      engine,
      info,
      errorCodes: errorCodes(),
      responseOverrides: RESPONSE_OVERRIDES,
    }).build()
    for (const warning of [...engine.warnings, ...warnings]) logger.warn(warning)
    logger.info(
      { paths: Object.keys(document.paths).length, ms: Math.round(performance.now() - started) },
      'OpenAPI document built'
    )
    return JSON.stringify(document)
  }

  #info(runtimeRoot: string): Schema {
    const pkg = JSON.parse(readFileSync(join(runtimeRoot, 'package.json'), 'utf8'))
    return {
      title: 'Agent Host API',
      version: String(pkg.version ?? '0.0.0'),
      description:
        'Hosted AI agents: programmatic API under /api/v1 (API key), dashboard API (JWT). ' +
        'Every JSON answer is `{ success: true, data }` or `{ success: false, error, code }`.',
    }
  }

  /** HTML of the explorer; its scripts and styles come from /docs/assets (no CDN). */
  explorerPage(): string {
    return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Agent Host API</title>
  <link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/assets/swagger-ui-standalone-preset.js"></script>
  <script>
    window.onload = function () {
      window.ui = SwaggerUIBundle({
        url: '/openapi.json',
        dom_id: '#swagger-ui',
        presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
        layout: 'BaseLayout',
        persistAuthorization: true,
      })
    }
  </script>
</body>
</html>
`
  }

  /** Absolute path and content type of an explorer file, or null for anything else. */
  explorerAsset(name: string): { path: string; contentType: string } | null {
    const contentType = EXPLORER_ASSETS[name]
    if (!contentType) return null
    const require = createRequire(import.meta.url)
    const folder = dirname(require.resolve('swagger-ui-dist/package.json'))
    return { path: join(folder, name), contentType }
  }
}

export default new OpenApiService()
