const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** A UUID as clients send them in paths and bodies (any case): ids checked before a query. */
export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID.test(value)
}
