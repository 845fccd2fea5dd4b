import type { ApplicationService } from '@adonisjs/core/types'

/**
 * Starts the periodic jobs registered in start/jobs.ts (a preload file,
 * imported before this `ready`) once the HTTP server is ready, and stops
 * them on shutdown. Only the web environment runs them: ace commands and
 * tests do not.
 */
export default class JobsProvider {
  constructor(protected app: ApplicationService) {}

  async ready() {
    if (this.app.getEnvironment() !== 'web' || process.env.PERIODIC_JOBS === 'false') return
    const { startPeriodicJobs } = await import('#core/jobs/periodic_jobs')
    startPeriodicJobs()
  }

  async shutdown() {
    const { stopPeriodicJobs } = await import('#core/jobs/periodic_jobs')
    stopPeriodicJobs()
  }
}
