import env from '#start/env'

/** Account limits (docs/security.md). Mutable so a test can lower one for itself. */
export const identityLimits = {
  /** Registration attempts per client address per day (SIGNUPS_PER_CLIENT_PER_DAY). */
  signupsPerClientPerDay: env.get('SIGNUPS_PER_CLIENT_PER_DAY') ?? 10,
  /** Verification mails asked for per hour, per address and per client address (429 beyond). */
  verificationMailsPerAddressPerHour: 5,
  verificationMailsPerClientPerHour: 1000,
  /**
   * Failed sign-ins in 15 minutes (429 with Retry-After beyond): per e-mail
   * and client address; per client address whatever the e-mail; and per
   * e-mail from every client address that has not signed in to it in the
   * last 30 days (docs/security.md "Sign-in limits").
   */
  loginFailuresPerAddressAndClient: 10,
  loginFailuresPerClient: 100,
  loginFailuresPerAddress: 50,
}
