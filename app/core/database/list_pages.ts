/**
 * Paged lists without counting: a page fetches one row more than it shows
 * to know whether a next page exists (no count(*) over a large table per
 * page view), and searches are prefix matches on lower-cased columns that
 * `text_pattern_ops` indexes serve.
 */
export interface Page<T> {
  rows: T[]
  page: number
  hasMore: boolean
}

/** The offset and limit that fetch page `page` (from 1) and one row more. */
export function pageWindow(page: number, size: number): { offset: number; limit: number } {
  return { offset: (page - 1) * size, limit: size + 1 }
}

/** The rows fetched with `pageWindow` as the page they show. */
export function pageOf<T>(rows: T[], page: number, size: number): Page<T> {
  return { rows: rows.slice(0, size), page, hasMore: rows.length > size }
}

/** A `like` pattern matching what starts with `value` (lower-cased; wildcards escaped). */
export function likePrefix(value: string): string {
  return `${value
    .trim()
    .toLowerCase()
    .replace(/[%_\\]/g, '\\$&')}%`
}
