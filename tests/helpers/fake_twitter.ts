import { execFileSync } from 'node:child_process'
import { createHmac } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { globalAgent, createServer, type Server } from 'node:https'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/**
 * A stand-in for the X API v2 on 127.0.0.1 for what the twitter connector
 * uses: `GET /2/users/me`, `GET /2/users/:id/mentions` (since_id,
 * max_results, author expansion; newest first with `meta.newest_id`) and
 * `POST /2/tweets` (with `reply.in_reply_to_tweet_id`). Every request must
 * carry a valid OAuth 1.0a HMAC-SHA1 signature for a registered account
 * (checked like X does: consumer and token secrets, method, URL, query and
 * oauth_* parameters), else 401 in X's error format.
 *
 * twitter-api-v2 speaks https only, so the stand-in serves https with a
 * throwaway self-signed certificate for 127.0.0.1 that `start` adds to
 * Node's global https agent (the one the library uses); `close` removes it.
 */
function selfSignedCertificate(): { key: string; cert: string } {
  const folder = mkdtempSync(join(tmpdir(), 'fake-x-'))
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        join(folder, 'key.pem'),
        '-out',
        join(folder, 'cert.pem'),
      ],
      { stdio: 'ignore' }
    )
    return {
      key: readFileSync(join(folder, 'key.pem'), 'utf8'),
      cert: readFileSync(join(folder, 'cert.pem'), 'utf8'),
    }
  } finally {
    rmSync(folder, { recursive: true, force: true })
  }
}

export interface FakeAccount {
  id: string
  username: string
  apiKey: string
  apiSecret: string
  accessToken: string
  accessSecret: string
  revoked: boolean
}

export interface FakeTweet {
  id: string
  text: string
  author_id: string
  conversation_id: string
  in_reply_to?: string
}

const encode = (value: string) =>
  encodeURIComponent(value).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`
  )

export class FakeTwitter {
  readonly accounts: FakeAccount[] = []
  readonly tweets: FakeTweet[] = []
  readonly users = new Map<string, string>()
  /** Calls to the mentions timeline, per account id. */
  readonly mentionReads = new Map<string, number>()
  badSignatures = 0
  #nextId = 1_800_000_000_000_000_000n
  #server?: Server

  get url(): string {
    const address = this.#server?.address() as AddressInfo | null
    if (!address) throw new Error('fake X API not started')
    return `https://127.0.0.1:${address.port}`
  }

  addAccount(username: string): FakeAccount {
    const random = () => Math.random().toString(36).slice(2, 14)
    const account: FakeAccount = {
      id: String(this.accounts.length + 100),
      username,
      apiKey: `key-${random()}`,
      apiSecret: `secret-${random()}`,
      accessToken: `100-${random()}`,
      accessSecret: `tsecret-${random()}`,
      revoked: false,
    }
    this.accounts.push(account)
    this.users.set(account.id, username)
    return account
  }

  /** Someone posts a tweet mentioning `account`. */
  mention(account: FakeAccount, text: string, author = { id: '555', username: 'ada' }) {
    this.users.set(author.id, author.username)
    const id = String(this.#nextId++)
    const tweet = {
      id,
      text: `@${account.username} ${text}`,
      author_id: author.id,
      conversation_id: id,
    }
    this.tweets.push(tweet)
    return tweet
  }

  repliesTo(tweetId: string): FakeTweet[] {
    return this.tweets.filter((tweet) => tweet.in_reply_to === tweetId)
  }

  /** The replies thread under a tweet, in order. */
  thread(tweetId: string): FakeTweet[] {
    const thread: FakeTweet[] = []
    let next = this.repliesTo(tweetId)[0]
    while (next) {
      thread.push(next)
      next = this.repliesTo(next.id)[0]
    }
    return thread
  }

  #previousCa: unknown

  async start(): Promise<this> {
    const { key, cert } = selfSignedCertificate()
    this.#previousCa = globalAgent.options.ca
    globalAgent.options.ca = cert
    this.#server = createServer({ key, cert }, (request, response) => {
      this.#receive(request, response).catch((error) => response.writeHead(500).end(String(error)))
    })
    await new Promise<void>((resolve) => this.#server!.listen(0, '127.0.0.1', resolve))
    return this
  }

  async close() {
    globalAgent.options.ca = this.#previousCa as typeof globalAgent.options.ca
    const server = this.#server
    this.#server = undefined
    if (!server) return
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }

  /** The account whose keys signed the request, when the signature is right. */
  #signer(request: IncomingMessage, url: URL): FakeAccount | undefined {
    const header = request.headers.authorization ?? ''
    if (!header.startsWith('OAuth ')) return undefined
    const oauth = Object.fromEntries(
      [...header.slice(6).matchAll(/(\w+)="([^"]*)"/g)].map(([, key, value]) => [
        key,
        decodeURIComponent(value),
      ])
    )
    const account = this.accounts.find(
      (candidate) =>
        candidate.apiKey === oauth.oauth_consumer_key && candidate.accessToken === oauth.oauth_token
    )
    if (!account || oauth.oauth_signature_method !== 'HMAC-SHA1') return undefined
    const params = [...url.searchParams.entries(), ...Object.entries(oauth)]
      .filter(([key]) => key !== 'oauth_signature')
      .map(([key, value]) => [encode(key), encode(value)])
      .sort(([a, av], [b, bv]) => (a === b ? (av < bv ? -1 : 1) : a < b ? -1 : 1))
      .map(([key, value]) => `${key}=${value}`)
      .join('&')
    const base = [request.method!, encode(`${url.origin}${url.pathname}`), encode(params)].join('&')
    const expected = createHmac(
      'sha1',
      `${encode(account.apiSecret)}&${encode(account.accessSecret)}`
    )
      .update(base)
      .digest('base64')
    if (expected !== oauth.oauth_signature) {
      this.badSignatures++
      return undefined
    }
    return account
  }

  async #receive(request: IncomingMessage, response: ServerResponse) {
    const url = new URL(request.url ?? '/', this.url)
    const chunks: Buffer[] = []
    for await (const chunk of request) chunks.push(chunk as Buffer)
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {}
    const account = this.#signer(request, url)
    if (!account || account.revoked) {
      return this.#send(response, 401, {
        title: 'Unauthorized',
        type: 'about:blank',
        status: 401,
        detail: 'Unauthorized',
      })
    }
    if (request.method === 'GET' && url.pathname === '/2/users/me') {
      return this.#send(response, 200, {
        data: { id: account.id, name: account.username, username: account.username },
      })
    }
    const mentions = /^\/2\/users\/(\d+)\/mentions$/.exec(url.pathname)
    if (request.method === 'GET' && mentions) {
      this.mentionReads.set(mentions[1], (this.mentionReads.get(mentions[1]) ?? 0) + 1)
      const username = this.users.get(mentions[1])
      const sinceId = url.searchParams.get('since_id')
      const max = Number(url.searchParams.get('max_results') ?? 100)
      const found = this.tweets
        .filter((tweet) => tweet.text.includes(`@${username}`) && tweet.author_id !== mentions[1])
        .filter((tweet) => !sinceId || BigInt(tweet.id) > BigInt(sinceId))
        .sort((a, b) => (BigInt(a.id) > BigInt(b.id) ? -1 : 1))
        .slice(0, max)
      if (found.length === 0) return this.#send(response, 200, { meta: { result_count: 0 } })
      const authors = [...new Set(found.map((tweet) => tweet.author_id))]
      return this.#send(response, 200, {
        data: found.map(({ in_reply_to: _ignored, ...tweet }) => tweet),
        includes: {
          users: authors.map((id) => ({
            id,
            name: this.users.get(id),
            username: this.users.get(id),
          })),
        },
        meta: {
          result_count: found.length,
          newest_id: found[0].id,
          oldest_id: found.at(-1)!.id,
        },
      })
    }
    if (request.method === 'POST' && url.pathname === '/2/tweets') {
      const id = String(this.#nextId++)
      const parent = this.tweets.find((tweet) => tweet.id === body.reply?.in_reply_to_tweet_id)
      this.tweets.push({
        id,
        text: String(body.text),
        author_id: account.id,
        conversation_id: parent?.conversation_id ?? id,
        in_reply_to: body.reply?.in_reply_to_tweet_id,
      })
      return this.#send(response, 201, {
        data: { id, text: body.text, edit_history_tweet_ids: [id] },
      })
    }
    this.#send(response, 404, {
      title: 'Not Found Error',
      type: 'about:blank',
      status: 404,
      detail: url.pathname,
    })
  }

  #send(response: ServerResponse, status: number, body: unknown) {
    response.writeHead(status, { 'content-type': 'application/json; charset=utf-8' })
    response.end(JSON.stringify(body))
  }
}
