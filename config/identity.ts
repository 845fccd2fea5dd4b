import env from '#start/env'

/** Account limits (docs/security.md). Mutable so a test can lower one for itself. */
export const identityLimits = {
  /** Registration attempts per client address per day (SIGNUPS_PER_CLIENT_PER_DAY). */
  signupsPerClientPerDay: env.get('SIGNUPS_PER_CLIENT_PER_DAY') ?? 10,
}
