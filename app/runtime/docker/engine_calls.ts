function statusOf(error: unknown): number | undefined {
  return (error as { statusCode?: number } | undefined)?.statusCode
}

/** `work`'s result, or undefined when the Engine API answered one of `statuses` (404: no such thing). */
export async function ignoreStatus<T>(
  work: Promise<T>,
  ...statuses: number[]
): Promise<T | undefined> {
  try {
    return await work
  } catch (error) {
    if (statuses.includes(statusOf(error) ?? 0)) return undefined
    throw error
  }
}
