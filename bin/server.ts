/*
|--------------------------------------------------------------------------
| HTTP server entrypoint
|--------------------------------------------------------------------------
|
| Fills in the embedded defaults (APP_KEY, embedded PostgreSQL), then boots
| the app and starts the HTTP server. Pending migrations run at start under
| an advisory lock (see the migrations provider).
|
*/
import 'reflect-metadata'
import { Ignitor, prettyPrintError } from '@adonisjs/core'
import { prepareRuntimeEnvironment } from '#core/bootstrap/runtime_environment'

const APP_ROOT = new URL('../', import.meta.url)

const IMPORTER = (filePath: string) => {
  if (filePath.startsWith('./') || filePath.startsWith('../')) {
    return import(new URL(filePath, APP_ROOT).href)
  }
  return import(filePath)
}

const runtime = await prepareRuntimeEnvironment(APP_ROOT)

new Ignitor(APP_ROOT, { importer: IMPORTER })
  .tap((app) => {
    app.booting(async () => {
      await import('#start/env')
    })
    app.terminating(() => runtime.release())
    app.listen('SIGTERM', () => app.terminate())
    app.listen('SIGINT', () => app.terminate())
  })
  .httpServer()
  .start()
  .catch(async (error) => {
    process.exitCode = 1
    prettyPrintError(error)
    await runtime.release()
  })
