import app from '@adonisjs/core/services/app'
import type { RuntimeService } from '#runtime/runtime_service'

let runtime: RuntimeService

await app.booted(async () => {
  runtime = await app.container.make('runtime')
})

/** The runtime service (container drivers), for modules outside the container. */
export { runtime as default }
