import router from '@adonisjs/core/services/router'
import { middleware } from '#start/kernel'

const SkillsController = () => import('#skills/controllers/skills_controller')

router
  .group(() => {
    router.get('/:id/skills', [SkillsController, 'index']).as('index')
    router.post('/:id/skills/install', [SkillsController, 'install']).as('install')
    router.post('/:id/skills/uninstall', [SkillsController, 'uninstall']).as('uninstall')
  })
  .prefix('/agents')
  .as('agents.skills')
  .where('id', router.matchers.uuid())
  .use(middleware.auth({ guards: ['jwt'] }))
