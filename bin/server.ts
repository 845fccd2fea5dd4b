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
    // The embedded database goes last, after every provider's shutdown has used it.
    // Once everything has shut down (agents stopped, their events stored, the
    // database closed), nothing left may keep the stopped process alive.
    const stop = () =>
      app
        .terminate()
        .finally(() => runtime.release())
        .finally(() => process.exit())
    app.listen('SIGTERM', stop)
    app.listen('SIGINT', stop)
  })
  .httpServer()
  .start()
  .catch(async (error) => {
    process.exitCode = 1
    prettyPrintError(error)
    await runtime.release()
  })
