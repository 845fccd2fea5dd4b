import { readFile } from 'node:fs/promises'
import type { HttpContext } from '@adonisjs/core/http'
import app from '@adonisjs/core/services/app'
import { NotFoundException } from '#core/exceptions/api_exceptions'

/**
 * The console's static files, served from the repository and node_modules
 * (no build step): Pico's classless stylesheet, the Transmit client and the
 * console's own small script and stylesheet. Read once, kept in memory.
 */
const ASSETS: Record<string, { path: string; type: string }> = {
  'pico.css': {
    path: 'node_modules/@picocss/pico/css/pico.classless.min.css',
    type: 'text/css; charset=utf-8',
  },
  'console.css': { path: 'resources/console/console.css', type: 'text/css; charset=utf-8' },
  'console.js': { path: 'resources/console/console.js', type: 'text/javascript; charset=utf-8' },
  'favicon.svg': { path: 'resources/console/favicon.svg', type: 'image/svg+xml' },
  'transmit.js': {
    path: 'node_modules/@adonisjs/transmit-client/build/index.js',
    type: 'text/javascript; charset=utf-8',
  },
}

const cache = new Map<string, Buffer>()

export default class ConsoleAssetsController {
  /** GET /favicon.ico: browsers ask for it on every page; it is the console's SVG icon. */
  async favicon(ctx: HttpContext) {
    ctx.params.file = 'favicon.svg'
    return this.show(ctx)
  }

  async show({ params, response }: HttpContext) {
    const asset = Object.hasOwn(ASSETS, params.file) ? ASSETS[params.file] : undefined
    if (!asset) throw new NotFoundException('No such console asset')
    let body = cache.get(params.file)
    if (!body) {
      body = await readFile(app.makePath(asset.path))
      cache.set(params.file, body)
    }
    response.header('content-type', asset.type)
    response.header('cache-control', 'public, max-age=300')
    return response.send(body)
  }
}
