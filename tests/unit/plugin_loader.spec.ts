import { test } from '@japa/runner'
import app from '@adonisjs/core/services/app'
import { InvalidPluginError, loadPlugins } from '#plugins/plugin_loader'
import { PluginRegistry } from '#plugins/plugin_registry'

const fixtures = (name: string) => app.makePath('tests/fixtures/plugin_discovery', name)

test.group('Plugin loader', () => {
  test('finds every plugin folder and skips folders starting with _', async ({ assert }) => {
    const plugins = await loadPlugins(fixtures('valid'))
    assert.deepEqual(
      plugins.map((plugin) => `${plugin.kind}:${plugin.name}@${plugin.version}`),
      ['framework:echo-framework@1.0.0', 'channel:loopback-channel@0.2.0']
    )

    const registry = new PluginRegistry(plugins)
    assert.equal(registry.framework('echo-framework').readinessPath, '/health')
    assert.equal(registry.findChannel('loopback-channel')?.name, 'loopback-channel')
    assert.isUndefined(registry.findFramework('loopback-channel'))
  })

  test('refuses {folder}: {reason}')
    .with([
      { folder: 'bad_kind', plugin: 'weird', reason: '"kind" must be "framework" or "channel"' },
      { folder: 'no_index', plugin: 'empty', reason: 'no index.ts or index.js' },
      {
        folder: 'bad_member',
        plugin: 'broken-framework',
        reason: 'missing function "renderFiles"',
      },
      { folder: 'throws', plugin: 'explodes', reason: 'plugin exploded at import' },
    ])
    .run(async ({ assert }, row) => {
      try {
        await loadPlugins(fixtures(row.folder))
        assert.fail('a malformed plugin must stop loading')
      } catch (error) {
        assert.instanceOf(error, InvalidPluginError)
        assert.include((error as InvalidPluginError).folder, `${row.folder}/${row.plugin}`)
        assert.include((error as Error).message, row.reason)
        assert.include((error as Error).message, row.plugin)
      }
    })

  test('an unknown framework is a 404 from the registry', async ({ assert }) => {
    const registry = new PluginRegistry([])
    assert.throws(() => registry.framework('nope'), 'Framework "nope" is not installed')
  })

  test('the app registry holds the plugins found under plugins/ at boot', async ({ assert }) => {
    const registry = await app.container.make('plugins')
    const loaded = await loadPlugins(app.makePath('plugins'))
    // Plus the test-only folders of EXTRA_PLUGIN_DIRS (bin/test.ts), in tests only.
    for (const folder of (process.env.EXTRA_PLUGIN_DIRS ?? '').split(',').filter(Boolean)) {
      loaded.push(...(await loadPlugins(app.makePath(folder.trim()))))
    }
    assert.deepEqual(
      registry
        .list()
        .map((plugin) => plugin.name)
        .sort(),
      loaded.map((plugin) => plugin.name).sort()
    )
  })
})
