/**
 * Requests and 5xx answers per minute for the last hour, in this process.
 * Kept in memory on purpose: each instance shows its own traffic (the
 * overview says so), which needs no write per request.
 */
class RequestCounter {
  #minutes = new Map<number, { requests: number; errors: number }>()

  record(status: number) {
    const minute = Math.floor(Date.now() / 60_000)
    let bucket = this.#minutes.get(minute)
    if (!bucket) {
      bucket = { requests: 0, errors: 0 }
      this.#minutes.set(minute, bucket)
      for (const key of this.#minutes.keys()) if (key < minute - 60) this.#minutes.delete(key)
    }
    bucket.requests++
    if (status >= 500) bucket.errors++
  }

  since(date: Date) {
    const from = Math.floor(date.getTime() / 60_000)
    let requests = 0
    let errors = 0
    for (const [minute, bucket] of this.#minutes) {
      if (minute >= from) {
        requests += bucket.requests
        errors += bucket.errors
      }
    }
    return { requests, errors }
  }
}

export const requestCounter = new RequestCounter()
