import router from '@adonisjs/core/services/router'
import { middleware } from '#start/kernel'
import { programmaticApi } from '#identity/middleware/programmatic_api'

const AgentsController = () => import('#agents/controllers/agents_controller')
const AgentRuntimeController = () => import('#agents/controllers/agent_runtime_controller')
const ContainerFilesController = () => import('#agents/controllers/container_files_controller')
const ConfigVersionsController = () => import('#agents/controllers/config_versions_controller')

/** `:id` is a UUID: anything else matches no route and answers 404. */
const uuid = router.matchers.uuid()

// Public: the owner (JWT) sees more.
router
  .get('/agents/by-slug/:slug', [AgentsController, 'bySlug'])
  .as('agents.bySlug')
  .use(middleware.optionalAuth())

// The JWT, or a short-lived logs token for EventSource clients (checked by the controller).
router
  .get('/agents/:id/logs', [AgentRuntimeController, 'logs'])
  .where('id', uuid)
  .as('agents.logs')
  .use(middleware.optionalAuth())

router
  .group(() => {
    router.post('/', [AgentsController, 'store']).as('store')
    router.get('/', [AgentsController, 'index']).as('index')
    router.get('/:id', [AgentsController, 'show']).as('show')
    router.patch('/:id', [AgentsController, 'update']).as('update')
    router.delete('/:id', [AgentsController, 'destroy']).as('destroy')

    router.post('/:id/start', [AgentRuntimeController, 'start']).as('start')
    router.post('/:id/stop', [AgentRuntimeController, 'stop']).as('stop')
    router.post('/:id/restart', [AgentRuntimeController, 'restart']).as('restart')
    router.get('/:id/status', [AgentRuntimeController, 'status']).as('status')
    router.get('/:id/stats', [AgentRuntimeController, 'stats']).as('stats')
    router.get('/:id/monitoring', [AgentRuntimeController, 'monitoring']).as('monitoring')
    router.get('/:id/memory', [AgentRuntimeController, 'memory']).as('memory')
    router.get('/:id/feed', [AgentRuntimeController, 'feed']).as('feed')
    router.post('/:id/logs/token', [AgentRuntimeController, 'logsToken']).as('logs.token')

    router.get('/:id/container-files', [ContainerFilesController, 'index']).as('files.index')
    router.get('/:id/container-files/read', [ContainerFilesController, 'read']).as('files.read')
    router.put('/:id/container-files', [ContainerFilesController, 'write']).as('files.write')
    router
      .put('/:id/container-files/write', [ContainerFilesController, 'write'])
      .as('files.writePut')
    router
      .post('/:id/container-files/write', [ContainerFilesController, 'write'])
      .as('files.writePost')
    router.delete('/:id/container-files', [ContainerFilesController, 'destroy']).as('files.destroy')
    router
      .delete('/:id/container-files/delete', [ContainerFilesController, 'destroy'])
      .as('files.delete')

    router.get('/:id/versions', [ConfigVersionsController, 'index']).as('versions.index')
    router.get('/:id/versions/:version', [ConfigVersionsController, 'show']).as('versions.show')
    router
      .post('/:id/versions/:version/restore', [ConfigVersionsController, 'restore'])
      .as('versions.restore')
    router
      .get('/:id/config-snapshots', [ConfigVersionsController, 'snapshots'])
      .as('snapshots.index')
    router
      .post('/:id/config-snapshots/:snapshotId/restore', [
        ConfigVersionsController,
        'restoreSnapshot',
      ])
      .as('snapshots.restore')
  })
  .prefix('/agents')
  .as('agents')
  .where('id', uuid)
  .use(middleware.auth({ guards: ['jwt'] }))

router
  .group(() => {
    router.get('/agents', [AgentsController, 'index']).as('index')
    router.get('/agents/:id', [AgentsController, 'show']).as('show')
    router.get('/agents/:id/status', [AgentRuntimeController, 'status']).as('status')
    router.post('/agents/:id/start', [AgentRuntimeController, 'start']).as('start')
    router.post('/agents/:id/stop', [AgentRuntimeController, 'stop']).as('stop')
    router.post('/agents/:id/restart', [AgentRuntimeController, 'restart']).as('restart')
  })
  .prefix('/api/v1')
  .as('api.v1.agents')
  .where('id', uuid)
  .use(programmaticApi)
