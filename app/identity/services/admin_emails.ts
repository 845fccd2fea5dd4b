import env from '#start/env'

/** Addresses listed in ADMIN_EMAILS (comma-separated) get `admin` when they verify. */
export function isAdminEmail(email: string): boolean {
  const list = (env.get('ADMIN_EMAILS') ?? '')
    .split(',')
    .map((entry) => entry.trim().toLowerCase())
    .filter(Boolean)
  return list.includes(email.trim().toLowerCase())
}
