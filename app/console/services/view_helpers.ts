import edge from 'edge.js'
import { DateTime } from 'luxon'

/**
 * Helpers the console's templates share (edge globals), so every page shows
 * times and audit changes the same way.
 */

type Instant = DateTime | Date | string | number | null | undefined

/** An instant as ISO 8601 UTC with `Z` (null when there is none or it is invalid). */
export function isoInstant(value: Instant): string | null {
  if (value === null || value === undefined || value === '') return null
  const time =
    value instanceof DateTime
      ? value
      : value instanceof Date
        ? DateTime.fromJSDate(value)
        : typeof value === 'number'
          ? DateTime.fromMillis(value)
          : DateTime.fromISO(value.replace(' ', 'T'))
  if (!time.isValid) return null
  return time.toUTC().startOf('second').toISO({ suppressMilliseconds: true })
}

/**
 * The text a `<time>` shows before the console's script puts it in the
 * reader's zone with a relative time: one fixed UTC form.
 */
export function utcText(iso: string | null): string {
  return iso ? `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC` : ''
}

/** An instant as plain text in the fixed UTC form, where markup cannot go (a select's options, a notice). */
export function utc(value: Instant): string {
  return utcText(isoInstant(value))
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

/**
 * One instant, the same on every page: a `<time>` holding the ISO instant,
 * showing UTC until console.js puts it in the reader's zone with "3 min ago".
 * `empty` is what shows when there is no instant.
 */
export function when(value: Instant, empty = '—'): string {
  const iso = isoInstant(value)
  if (!iso) return escapeHtml(empty)
  return `<time datetime="${iso}" data-relative title="${utcText(iso)}">${utcText(iso)}</time>`
}

export interface AuditChange {
  field: string
  before: string
  after: string
}

function shown(value: unknown): string {
  if (value === undefined || value === null || value === '') return '—'
  if (typeof value === 'string') return value
  return JSON.stringify(value)
}

/**
 * An audit entry's changes: every field whose value differs between the
 * state before and after (fields only in `after`, such as a reason, too).
 */
export function auditChanges(
  before: Record<string, unknown> | null,
  after: Record<string, unknown> | null
): AuditChange[] {
  const fields = [...new Set([...Object.keys(before ?? {}), ...Object.keys(after ?? {})])]
  return fields
    .map((field) => ({ field, before: shown(before?.[field]), after: shown(after?.[field]) }))
    .filter((change) => change.before !== change.after)
}

const BYTE_UNITS = ['B', 'KB', 'MB', 'GB', 'TB']

/** A size in bytes the way people read it: "512 B", "3.4 KB", "120 MB" (units of 1024). */
export function bytes(value: number | string | null | undefined): string {
  if (value === null || value === undefined || value === '') return '—'
  let size = Number(value)
  if (!Number.isFinite(size) || size < 0) return '—'
  let unit = 0
  while (size >= 1024 && unit < BYTE_UNITS.length - 1) {
    size /= 1024
    unit++
  }
  const digits = unit === 0 || size >= 100 ? 0 : 1
  return `${size.toFixed(digits)} ${BYTE_UNITS[unit]}`
}

edge.global('when', when)
edge.global('bytes', bytes)
edge.global('utc', utc)
edge.global('auditChanges', auditChanges)
