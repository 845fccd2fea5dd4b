import { randomUUID } from 'node:crypto'
import { hashPassword, needsRehash, verifyPassword } from '#identity/services/password_hashing'
import { DateTime } from 'luxon'
import limiter from '@adonisjs/limiter/services/main'
import db from '@adonisjs/lucid/services/db'
import {
  AuthRequiredException,
  EmailNotVerifiedException,
  ForbiddenException,
  RateLimitExceededException,
} from '#core/exceptions/api_exceptions'
import User from '#identity/models/user'
import { normalizeEmail } from '#identity/services/account_service'
import { clientAddressHash } from '#identity/services/person_signals'
import { identityLimits } from '#config/identity'
import { JWT_EXPIRES_IN, signJwt } from '#identity/services/jwt'
import { addressKey, randomToken, sha256 } from '#identity/services/secure_tokens'
import { authenticateBearer, credentialKind } from '#identity/services/token_authenticator'

export const REFRESH_TOKEN_PREFIX = 'hrt_'
export const REFRESH_TTL_DAYS = 30

/** Failed sign-ins are counted in this window (limits: config/identity.ts). */
const LOGIN_WINDOW = '15 mins'
/** How long a client address that signed in stays known to the account. */
const KNOWN_CLIENT_TTL = '30 days'

const INVALID_CREDENTIALS = 'Invalid e-mail or password'
const INVALID_REFRESH = 'Invalid or expired refresh token'

export interface SessionTokens {
  token: string
  refreshToken: string
  expiresIn: typeof JWT_EXPIRES_IN
}

export interface LoginResult extends SessionTokens {
  user: { id: string; email: string; username: string; tier: string }
}

let dummyHash: Promise<string> | undefined

/** Compared against when the e-mail is unknown, so both failures take as long. */
function timingDummy(): Promise<string> {
  dummyHash ??= hashPassword(randomToken())
  return dummyHash
}

/**
 * A new JWT plus a refresh token. Without `familyId` the refresh token
 * starts a new family (a sign-in); rotation passes the family along.
 */
export async function issueSession(user: User, familyId: string = randomUUID()) {
  const refreshToken = randomToken(REFRESH_TOKEN_PREFIX)
  const id = randomUUID()
  await db.table('refresh_tokens').insert({
    id,
    user_id: user.id,
    family_id: familyId,
    token_hash: sha256(refreshToken),
    expires_at: DateTime.now().plus({ days: REFRESH_TTL_DAYS }).toJSDate(),
    revoked_at: null,
    replaced_by_id: null,
    created_at: new Date(),
  })
  const tokens: SessionTokens = {
    token: signJwt(user.id, { version: user.tokenVersion }).token,
    refreshToken,
    expiresIn: JWT_EXPIRES_IN,
  }
  return { tokens, refreshTokenId: id }
}

async function checkPassword(email: string, password: string): Promise<User> {
  const user = await User.query().where('email', email).first()
  if (!user) {
    await verifyPassword(await timingDummy(), password)
    throw new AuthRequiredException(INVALID_CREDENTIALS)
  }
  if (!(await verifyPassword(user.password, password))) {
    throw new AuthRequiredException(INVALID_CREDENTIALS)
  }
  if (needsRehash(user.password)) {
    // Made at an older cost: redone now that the password is at hand.
    user.password = await hashPassword(password)
    await user.save()
  }
  return user
}

/**
 * Checks an e-mail and password for a sign-in (the dashboard's and the
 * console's). One message for an unknown e-mail and a wrong password. In
 * 15 minutes, after 10 failures for the same e-mail and client address,
 * 100 from one client address whatever the e-mail, or 50 for the same
 * e-mail from client addresses new to the account: 429 with Retry-After
 * until the window passes (a success resets the per-e-mail counts).
 *
 * The third limit holds a botnet (many addresses, 10 tries each) to 50
 * guesses per 15 minutes on one account. Client addresses that signed in
 * to the account in the last 30 days are not counted by it, so whoever
 * sprays an account cannot lock its owner out of their usual network
 * (docs/security.md "Sign-in limits").
 */
export async function authenticate(emailInput: string, password: string, ip: string) {
  const email = normalizeEmail(emailInput)
  const perAddress = limiter.use({
    requests: identityLimits.loginFailuresPerAddressAndClient,
    duration: LOGIN_WINDOW,
  })
  const perClient = limiter.use({
    requests: identityLimits.loginFailuresPerClient,
    duration: LOGIN_WINDOW,
  })
  const known = await isKnownClient(email, ip)
  const verify = known
    ? () => checkPassword(email, password)
    : async () => {
        const acrossClients = limiter.use({
          requests: identityLimits.loginFailuresPerAddress,
          duration: LOGIN_WINDOW,
        })
        const [throttled, checked] = await acrossClients.penalize(
          `login-address:${addressKey(email)}`,
          () => checkPassword(email, password)
        )
        if (throttled) throw tooManyFailures(throttled.response.availableIn)
        return checked
      }
  const [clientThrottled, user] = await perClient.penalize(`login-client:${ip}`, async () => {
    const [throttled, checked] = await perAddress.penalize(
      `login:${addressKey(email)}:${ip}`,
      verify
    )
    if (throttled) throw tooManyFailures(throttled.response.availableIn)
    return checked
  })
  if (clientThrottled) throw tooManyFailures(clientThrottled.response.availableIn)

  if (!user.isVerified) throw new EmailNotVerifiedException()
  if (user.disabledAt) throw new ForbiddenException('This account is disabled')
  if (!known) await rememberClient(email, ip)
  return user
}

function knownClients() {
  return limiter.use({ requests: 1_000_000, duration: KNOWN_CLIENT_TTL })
}

/** Signed in to this e-mail's account from this client address in the last 30 days. */
async function isKnownClient(email: string, ip: string): Promise<boolean> {
  const seen = await knownClients().get(`login-known:${addressKey(email)}:${clientAddressHash(ip)}`)
  return !!seen && seen.consumed > 0
}

async function rememberClient(email: string, ip: string) {
  await knownClients().increment(`login-known:${addressKey(email)}:${clientAddressHash(ip)}`)
}

function tooManyFailures(availableIn: number) {
  return RateLimitExceededException.retryAfter(
    `Too many failed sign-in attempts; try again in ${availableIn} seconds`,
    availableIn
  )
}

/** POST /auth/login: session tokens for a verified, enabled account. */
export async function login(emailInput: string, password: string, ip: string) {
  const user = await authenticate(emailInput, password, ip)
  const { tokens } = await issueSession(user)
  const result: LoginResult = {
    ...tokens,
    user: { id: user.id, email: user.email, username: user.username, tier: user.effectiveTier },
  }
  return result
}

/**
 * Revokes a refresh-token family and ends the account's JWTs at once (a new
 * token version: every JWT issued before is refused). Signing out therefore
 * signs out every dashboard session of the account; API keys are not
 * affected.
 */
async function revokeFamily(familyId: string) {
  await db
    .from('refresh_tokens')
    .where('family_id', familyId)
    .whereNull('revoked_at')
    .update({ revoked_at: new Date() })
  const member = await db
    .from('refresh_tokens')
    .where('family_id', familyId)
    .select('user_id')
    .first()
  if (member) await endJwts(member.user_id)
}

/** Bumps the token version: every JWT issued before is refused from now on. */
export async function endJwts(userId: string): Promise<void> {
  const user = await User.find(userId)
  if (!user) return
  user.tokenVersion = (user.tokenVersion ?? 0) + 1
  // Saving through the model evicts the auth cache here and, via NOTIFY, elsewhere.
  await user.save()
}

function findByToken(refreshToken: string) {
  if (!refreshToken.startsWith(REFRESH_TOKEN_PREFIX) || refreshToken.length > 200) return null
  return db.from('refresh_tokens').where('token_hash', sha256(refreshToken)).first()
}

/**
 * POST /auth/refresh. Each refresh token works once: it is revoked and
 * replaced by a new one of the same family. Presenting a token that was
 * already rotated (a stolen copy, or the legitimate owner after a thief)
 * revokes the whole family, so every holder must sign in again.
 */
export async function refresh(refreshToken: string): Promise<SessionTokens> {
  const row = await findByToken(refreshToken)
  if (!row) throw new AuthRequiredException(INVALID_REFRESH)
  if (row.revoked_at) {
    await revokeFamily(row.family_id)
    throw new AuthRequiredException(INVALID_REFRESH)
  }
  if (new Date(row.expires_at).getTime() <= Date.now()) {
    throw new AuthRequiredException(INVALID_REFRESH)
  }

  const user = await User.find(row.user_id)
  if (!user || user.disabledAt) {
    await revokeFamily(row.family_id)
    throw new AuthRequiredException(INVALID_REFRESH)
  }

  // Claim the token atomically: of two concurrent uses only one wins; the
  // other counts as reuse.
  const claimed = await db
    .from('refresh_tokens')
    .where('id', row.id)
    .whereNull('revoked_at')
    .update({ revoked_at: new Date() })
    .returning('id')
  if (claimed.length === 0) {
    await revokeFamily(row.family_id)
    throw new AuthRequiredException(INVALID_REFRESH)
  }

  const { tokens, refreshTokenId } = await issueSession(user, row.family_id)
  await db.from('refresh_tokens').where('id', row.id).update({ replaced_by_id: refreshTokenId })
  return tokens
}

/**
 * POST /auth/logout: revokes the refresh token's whole family, and ends
 * the JWT the request was sent with, with or without a refresh token (a
 * new token version: refused from now on by every instance, since the
 * version is in the users row the guard reads). A JWT that is already
 * invalid changes nothing, so an old token cannot sign anyone out.
 */
export async function logout(refreshToken: string | null, bearer: string | null): Promise<void> {
  const ended = new Set<string>()
  if (refreshToken) {
    const row = await findByToken(refreshToken)
    if (row) {
      await revokeFamily(row.family_id)
      ended.add(row.user_id)
    }
  }
  if (bearer && credentialKind(bearer) === 'jwt') {
    const identity = await authenticateBearer(bearer, { allow: ['jwt'] }).catch(() => null)
    const userId = identity ? String(identity.row.id) : null
    if (userId && !ended.has(userId)) await endJwts(userId)
  }
}

/**
 * The owner of a live (not revoked, not expired) refresh token, without
 * rotating it: lets a browser that is signed in (it holds the HttpOnly
 * cookie) prove who it is on a top-level navigation, where it cannot send
 * an Authorization header (data export download link).
 */
export async function userOfLiveRefreshToken(refreshToken: string | null): Promise<User | null> {
  if (!refreshToken) return null
  const row = await findByToken(refreshToken)
  if (!row || row.revoked_at || new Date(row.expires_at).getTime() <= Date.now()) return null
  const user = await User.find(row.user_id)
  return user && !user.disabledAt ? user : null
}
