import router from '@adonisjs/core/services/router'
import vine from '@vinejs/vine'
import * as exceptions from '#core/exceptions/api_exceptions'

/**
 * Routes that exist only when NODE_ENV=test, so the suite can provoke every
 * error class through real HTTP.
 */
const throwers: Record<string, () => never> = {
  'auth': () => {
    throw new exceptions.AuthRequiredException()
  },
  'forbidden': () => {
    throw new exceptions.ForbiddenException()
  },
  'not-found': () => {
    throw new exceptions.NotFoundException()
  },
  'agent-not-running': () => {
    throw new exceptions.AgentNotRunningException()
  },
  'gone': () => {
    throw new exceptions.GoneException()
  },
  'content-blocked': () => {
    throw new exceptions.ContentBlockedException()
  },
  'rate-limit': () => {
    throw new exceptions.RateLimitExceededException()
  },
  'insufficient-credits': () => {
    throw new exceptions.InsufficientCreditsException()
  },
  'unexpected': () => {
    throw new Error('select * from secret_table where password = hunter2')
  },
}

const echoValidator = vine.create({
  name: vine.string().minLength(2).maxLength(50),
  count: vine.number().min(1).optional(),
})

router
  .group(() => {
    router.get('/errors/:kind', ({ params }) => {
      const thrower = throwers[params.kind]
      if (!thrower) throw new exceptions.NotFoundException(`No test error "${params.kind}"`)
      return thrower()
    })
    router.post('/echo', async ({ request }) => request.validateUsing(echoValidator))
    router.get('/text', ({ response }) => response.type('text/plain').send('plain line\n'))
    // Logs an object full of credentials, so a test can read the real log line.
    router.post('/log-secrets', ({ request, logger }) => {
      logger.warn(
        {
          headers: request.headers(),
          body: request.body(),
          user: { email: 'a@example.com', password: request.input('password') },
        },
        'test log with secrets'
      )
      return { logged: true }
    })
  })
  .prefix('/__test')
