/*
|--------------------------------------------------------------------------
| Ace entrypoint
|--------------------------------------------------------------------------
|
| Commands that touch the app (migrations, user:role, repl) get the same
| embedded defaults as the server; dev tooling (serve, build, test, make:*)
| does not need them and starts nothing.
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

const TOOLING_COMMANDS =
  /^(serve|build|test|list|add|configure|eject|env:|make:|generate:|inspect:|--help|-h)/
const commandName = process.argv[2] ?? 'list'
const needsRuntime = !TOOLING_COMMANDS.test(commandName)
const runtime = needsRuntime
  ? await prepareRuntimeEnvironment(APP_ROOT, { log: (m) => console.error(m) })
  : { release: async () => {} }

new Ignitor(APP_ROOT, { importer: IMPORTER })
  .tap((app) => {
    app.booting(async () => {
      await import('#start/env')
    })
    app.terminating(() => runtime.release())
    app.listen('SIGTERM', () => app.terminate())
    app.listen('SIGINT', () => app.terminate())
  })
  .ace()
  .handle(process.argv.splice(2))
  .catch((error) => {
    process.exitCode = 1
    prettyPrintError(error)
  })
  .finally(() => runtime.release())
