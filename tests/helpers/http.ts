/**
 * Base URL of the test HTTP server (started by tests/bootstrap.ts), for
 * clients other than Japa's: fetch, SSE readers, WebSocket clients.
 */
export function baseUrl(): string {
  return `http://${process.env.HOST ?? '127.0.0.1'}:${process.env.PORT ?? '3333'}`
}

/** POST a raw body (for malformed or oversized payloads the JSON client cannot send). */
export async function postRaw(path: string, body: string, contentType = 'application/json') {
  const response = await fetch(`${baseUrl()}${path}`, {
    method: 'POST',
    headers: { 'content-type': contentType },
    body,
  })
  const text = await response.text()
  let json: any
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: response.status, headers: response.headers, text, json }
}

export interface JsonRequest {
  method?: string
  /** Sent as `Authorization: Bearer <token>`. */
  token?: string
  /** Sent as the JSON body. */
  json?: unknown
  timeoutMs?: number
}

/**
 * A request to the server at `url` with fetch (a client of its own, for
 * servers other than the test run's); answers the status and the body,
 * parsed when it is JSON, as text otherwise.
 */
export async function requestJson(
  url: string,
  path: string,
  init: JsonRequest = {}
): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = {}
  if (init.token) headers.authorization = `Bearer ${init.token}`
  if (init.json !== undefined) headers['content-type'] = 'application/json'
  const response = await fetch(`${url}${path}`, {
    method: init.method ?? (init.json === undefined ? 'GET' : 'POST'),
    headers,
    body: init.json === undefined ? undefined : JSON.stringify(init.json),
    signal: AbortSignal.timeout(init.timeoutMs ?? 15_000),
  })
  const text = await response.text()
  try {
    return { status: response.status, body: JSON.parse(text) }
  } catch {
    return { status: response.status, body: text }
  }
}
