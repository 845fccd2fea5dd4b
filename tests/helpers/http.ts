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
