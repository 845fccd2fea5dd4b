/*
|--------------------------------------------------------------------------
| Test runner entrypoint
|--------------------------------------------------------------------------
|
| Uses DATABASE_URL when set; otherwise the embedded PostgreSQL with a
| database of its own (agent_host_test), so tests never touch dev data.
|
*/
process.env.NODE_ENV = 'test'
// Test-only plugins the app loads besides plugins/ (the fixture framework; see PluginProvider).
process.env.EXTRA_PLUGIN_DIRS ??= 'tests/fixtures/plugins'
// Tests play clients behind a local reverse proxy (X-Forwarded-For from loopback is believed).
process.env.TRUST_PROXY ??= 'loopback'
// Test servers do not install and warm OpenClaw and Hermes at start (the few tests that boot them do it on demand).
process.env.AGENT_PREPARE_FRAMEWORKS ??= 'off'
// Nor build templates: a template is one more gateway boot; the template tests make their own driver.
process.env.AGENT_TEMPLATES ??= 'off'
// The suite registers hundreds of accounts from one address; the limit's own test lowers it.
process.env.SIGNUPS_PER_CLIENT_PER_DAY ??= '1000000'
// scrypt at 2^14 instead of 2^17 (a second per hash): the rehash test checks the upgrade path.
process.env.PASSWORD_HASH_COST ??= '16384'

import 'reflect-metadata'
import { readFileSync } from 'node:fs'
import { matchesGlob } from 'node:path'
import { Ignitor, prettyPrintError } from '@adonisjs/core'
import { configure, processCLIArgs, run } from '@japa/runner'
import { prepareRuntimeEnvironment } from '#core/bootstrap/runtime_environment'

const APP_ROOT = new URL('../', import.meta.url)

const IMPORTER = (filePath: string) => {
  if (filePath.startsWith('./') || filePath.startsWith('../')) {
    return import(new URL(filePath, APP_ROOT).href)
  }
  return import(filePath)
}

const runtime = await prepareRuntimeEnvironment(APP_ROOT, {
  database: 'agent_host_test',
  log: (m) => console.error(m),
})

type Suites = { name: string; files: string | string[] }[]

/**
 * A shard of bin/test_parallel.ts runs only its files (TEST_SHARD_FILES: a
 * file listing them, one a line), each in the suite whose globs match it.
 */
function shardSuites<T extends Suites>(suites: T): T {
  if (!process.env.TEST_SHARD_FILES) return suites
  const files = readFileSync(process.env.TEST_SHARD_FILES, 'utf8').split('\n').filter(Boolean)
  return suites
    .map((suite) => {
      const globs = Array.isArray(suite.files) ? suite.files : [suite.files]
      return {
        ...suite,
        files: files.filter((file) => globs.some((glob) => matchesGlob(file, glob))),
      }
    })
    .filter((suite) => suite.files.length > 0) as T
}

new Ignitor(APP_ROOT, { importer: IMPORTER })
  .tap((app) => {
    app.booting(async () => {
      await import('#start/env')
    })
    app.listen('SIGTERM', () => app.terminate())
    app.listen('SIGINT', () => app.terminate())
  })
  .testRunner()
  .configure(async (app) => {
    const { runnerHooks, ...config } = await import('../tests/bootstrap.js')

    processCLIArgs(process.argv.splice(2))
    configure({
      ...app.rcFile.tests,
      suites: shardSuites(app.rcFile.tests.suites),
      ...config,
      ...{
        setup: runnerHooks.setup,
        teardown: runnerHooks.teardown.concat([() => app.terminate(), () => runtime.release()]),
      },
    })
  })
  .run(async () => {
    await run()
    // Everything is reported and torn down by now. Something a test left open (a socket, a
    // timer) kept some shard processes alive for a minute and more: say what, and end.
    setTimeout(() => {
      console.error(
        `test process: still running 5 s after the run, ended; open: ${process
          .getActiveResourcesInfo()
          .join(', ')}`
      )
      process.exit()
    }, 5_000).unref()
  })
  .catch(async (error) => {
    process.exitCode = 1
    prettyPrintError(error)
    await runtime.release()
  })
