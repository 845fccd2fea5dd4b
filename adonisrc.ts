import { defineConfig } from '@adonisjs/core/app'

export default defineConfig({
  experimental: {},

  commands: [
    () => import('@adonisjs/core/commands'),
    () => import('@adonisjs/lucid/commands'),
    () => import('@adonisjs/bouncer/commands'),
  ],

  providers: [
    () => import('@adonisjs/core/providers/app_provider'),
    () => import('@adonisjs/core/providers/hash_provider'),
    {
      file: () => import('@adonisjs/core/providers/repl_provider'),
      environment: ['repl', 'test'],
    },
    () => import('@adonisjs/core/providers/vinejs_provider'),
    () => import('@adonisjs/core/providers/edge_provider'),
    () => import('@adonisjs/cors/cors_provider'),
    () => import('@adonisjs/lucid/database_provider'),
    () => import('@adonisjs/auth/auth_provider'),
    () => import('@adonisjs/bouncer/bouncer_provider'),
    () => import('@adonisjs/redis/redis_provider'),
    () => import('@adonisjs/limiter/limiter_provider'),
    () => import('@adonisjs/mail/mail_provider'),
    () => import('@adonisjs/session/session_provider'),
    () => import('@adonisjs/shield/shield_provider'),
    () => import('@adonisjs/transmit/transmit_provider'),
    () => import('#providers/plugin_provider'),
    () => import('#providers/runtime_provider'),
    { file: () => import('#providers/agents_provider'), environment: ['web', 'test'] },
    () => import('#providers/migrations_provider'),
    () => import('#providers/jobs_provider'),
    () => import('#providers/channels_provider'),
    () => import('#identity/providers/identity_provider'),
    { file: () => import('#chat/providers/chat_provider'), environment: ['web', 'test'] },
    { file: () => import('#providers/http_server_provider'), environment: ['web', 'test'] },
  ],

  // Start-up registrations (docs: README "Start-up"); routes files only declare routes.
  preloads: [
    () => import('#start/routes'),
    () => import('#start/kernel'),
    () => import('#start/jobs'),
    () => import('#start/export_sections'),
    () => import('#start/transmit'),
    () => import('#start/view'),
    () => import('#start/knowledge'),
    { file: () => import('#start/openapi'), environment: ['web', 'test'] },
  ],

  tests: {
    suites: [
      {
        files: ['tests/unit/**/*.spec.ts'],
        name: 'unit',
        timeout: 10_000,
      },
      {
        files: ['tests/functional/**/*.spec.ts'],
        name: 'functional',
        timeout: 30_000,
      },
      {
        // Faults injected for real (docs/reliability.md); also `npm run faults`.
        files: ['tests/faults/**/*.spec.ts'],
        name: 'faults',
        timeout: 120_000,
      },
      {
        // Real agents attack the tenant boundary on every sandbox mode (docs/security.md
        // "Red team"); also `npm run redteam`.
        files: ['tests/redteam/**/*.spec.ts'],
        name: 'redteam',
        timeout: 900_000,
      },
    ],
    forceExit: false,
  },

  metaFiles: [
    { pattern: 'resources/views/**/*.edge', reloadServer: false },
    { pattern: 'public/**', reloadServer: false },
    // The console's own script and stylesheet (served by ConsoleAssetsController).
    { pattern: 'resources/console/**', reloadServer: false },
    // The skills catalogue ships as files (app/skills reads them at run time).
    { pattern: 'skills/**/SKILL.md', reloadServer: true },
    // Compiled at run time with gcc (app/runtime/process/file_identities.ts).
    { pattern: 'app/runtime/process/*.c', reloadServer: false },
    // Preloaded as it is into agents' Node.js processes (app/runtime/process/own_randomness.ts).
    { pattern: 'app/runtime/process/*.cjs', reloadServer: false },
  ],

  hooks: {},
})
