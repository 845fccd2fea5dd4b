import router from '@adonisjs/core/services/router'
import { middleware } from '#start/kernel'

const BackupsController = () => import('#backups/controllers/backups_controller')

/** `:id` and `:backupId` are UUIDs: anything else matches no route and answers 404. */
const uuid = router.matchers.uuid()

router
  .group(() => {
    router.post('/import', [BackupsController, 'import']).as('import')
    router.post('/:id/clone', [BackupsController, 'clone']).as('clone')
    router.post('/:id/backups', [BackupsController, 'store']).as('backups.store')
    router.get('/:id/backups', [BackupsController, 'index']).as('backups.index')
    router
      .get('/:id/backups/:backupId/download', [BackupsController, 'download'])
      .as('backups.download')
    router
      .post('/:id/backups/:backupId/restore', [BackupsController, 'restore'])
      .as('backups.restore')
    router.delete('/:id/backups/:backupId', [BackupsController, 'destroy']).as('backups.destroy')
  })
  .prefix('/agents')
  .as('agents')
  .where('id', uuid)
  .where('backupId', uuid)
  .use(middleware.auth({ guards: ['jwt'] }))
