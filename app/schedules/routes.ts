import router from '@adonisjs/core/services/router'
import { middleware } from '#start/kernel'

const SchedulesController = () => import('#schedules/controllers/schedules_controller')

router
  .group(() => {
    router.get('/:id/schedules', [SchedulesController, 'index']).as('index')
    router.post('/:id/schedules', [SchedulesController, 'store']).as('store')
    router.delete('/:id/schedules/:jobId', [SchedulesController, 'destroy']).as('destroy')
    router.post('/:id/schedules/:jobId/pause', [SchedulesController, 'pause']).as('pause')
    router.post('/:id/schedules/:jobId/resume', [SchedulesController, 'resume']).as('resume')
    router.get('/:id/schedules/:jobId/runs', [SchedulesController, 'runs']).as('runs')
  })
  .prefix('/agents')
  .as('agents.schedules')
  .where('id', router.matchers.uuid())
  .use(middleware.auth({ guards: ['jwt'] }))
