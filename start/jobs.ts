/*
|--------------------------------------------------------------------------
| Periodic jobs
|--------------------------------------------------------------------------
|
| Every periodic job of every area (app/core/jobs/periodic_jobs.ts). This
| preload runs before the providers' `ready`, where JobsProvider starts the
| timers (web server only); tests run a job by name through registeredJobs().
|
*/
import { registerPeriodicJob } from '#core/jobs/periodic_jobs'
import { purgeExpiredCacheJob } from '#core/cache/shared_cache'
import { mailOutboxJob } from '#identity/services/mail_outbox'
import { sendMail } from '#identity/services/mailer'
import { billingLapseJob } from '#billing/services/lapse_job'
import { pruneStoredMessagesJob } from '#chat/services/history_service'
import { releaseExpiredHoldsJob } from '#credits/services/credit_holds'
import { purgeExpiredIdempotencyKeysJob } from '#chat/services/idempotency'
import { runDueSchedulesJob } from '#schedules/services/schedule_service'
import { dailyBackupsJob } from '#backups/services/daily_backups'

registerPeriodicJob(mailOutboxJob(sendMail))
registerPeriodicJob(billingLapseJob)
registerPeriodicJob(pruneStoredMessagesJob)
registerPeriodicJob(releaseExpiredHoldsJob)
registerPeriodicJob(purgeExpiredIdempotencyKeysJob)
registerPeriodicJob(runDueSchedulesJob)
registerPeriodicJob(purgeExpiredCacheJob)
registerPeriodicJob(dailyBackupsJob)
