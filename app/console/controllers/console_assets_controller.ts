import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import type { HttpContext } from '@adonisjs/core/http'
import app from '@adonisjs/core/services/app'
import { NotFoundException } from '#core/exceptions/api_exceptions'

const require = createRequire(import.meta.url)

/**
 * The console's static files: Pico's classless stylesheet and the Transmit
 * client, read from wherever Node resolves those packages (so a built
 * server under build/ finds them too), and the console's own script and
 * stylesheet from resources/console (copied into the build as metaFiles,
 * adonisrc.ts). Read once, kept in memory.
 */
const ASSETS: Record<string, { path: () => string; type: string }> = {
  'pico.css': {
    path: () => require.resolve('@picocss/pico/css/pico.classless.min.css'),
    type: 'text/css; charset=utf-8',
  },
  'console.css': {
    path: () => app.makePath('resources/console/console.css'),
    type: 'text/css; charset=utf-8',
  },
  'console.js': {
    path: () => app.makePath('resources/console/console.js'),
    type: 'text/javascript; charset=utf-8',
  },
  'favicon.svg': {
    path: () => app.makePath('resources/console/favicon.svg'),
    type: 'image/svg+xml',
  },
  'transmit.js': {
    path: () => require.resolve('@adonisjs/transmit-client/build/index.js'),
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
      body = await readFile(asset.path())
      cache.set(params.file, body)
    }
    response.header('content-type', asset.type)
    response.header('cache-control', 'public, max-age=300')
    return response.send(body)
  }
}
