import type { DatabaseQueryBuilderContract } from '@adonisjs/lucid/types/querybuilder'

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

/**
 * Page `page` (from 1) of `query`, newest first by `createdAt` with ties in
 * `id` order: it fetches one row more than it shows to tell whether a next
 * page exists.
 */
export async function newestFirstPage<T>(
  query: DatabaseQueryBuilderContract<any>,
  page: number,
  size: number,
  columns: { createdAt: string; id: string } = { createdAt: 'created_at', id: 'id' }
): Promise<Page<T>> {
  const rows: T[] = await query
    .orderBy(columns.createdAt, 'desc')
    .orderBy(columns.id)
    .offset((page - 1) * size)
    .limit(size + 1)
  return { rows: rows.slice(0, size), page, hasMore: rows.length > size }
}

/** A `like` pattern matching what starts with `value` (lower-cased; wildcards escaped). */
export function likePrefix(value: string): string {
  return `${value
    .trim()
    .toLowerCase()
    .replace(/[%_\\]/g, '\\$&')}%`
}
