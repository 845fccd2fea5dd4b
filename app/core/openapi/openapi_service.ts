import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import app from '@adonisjs/core/services/app'
import logger from '@adonisjs/core/services/logger'
import router from '@adonisjs/core/services/router'
import type { RouteJSON } from '@adonisjs/core/types/http'
import * as apiExceptions from '#core/exceptions/api_exceptions'
import { apiContracts } from '#core/openapi/contracts'
import { DocumentBuilder } from '#core/openapi/document_builder'
import type { JsonSchema } from '#core/openapi/shapes'

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
 * Builds the OpenAPI document of the live router from each route's contract
 * (see contracts.ts and document_builder.ts), once: the first request pays
 * for it, later ones get the cached document. Routes and contracts are all
 * registered at boot, so a document built after boot is complete.
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

  /** The routes the document describes: every route of the live router but the excluded ones. */
  documentedRoutes(): RouteJSON[] {
    return (router.toJSON().root ?? []).filter((route) => !isExcluded(route.pattern))
  }

  async #build(): Promise<string> {
    const started = performance.now()
    const { document, warnings } = await new DocumentBuilder({
      routes: this.documentedRoutes(),
      contractOf: (name) => apiContracts.get(name),
      info: this.#info(fileURLToPath(app.appRoot)),
      errorCodes: errorCodes(),
    }).build()
    for (const warning of warnings) logger.warn(warning)
    logger.info(
      { paths: Object.keys(document.paths).length, ms: Math.round(performance.now() - started) },
      'OpenAPI document built'
    )
    return JSON.stringify(document)
  }

  #info(runtimeRoot: string): JsonSchema {
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
