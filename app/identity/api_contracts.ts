/** What the identity routes take and answer (the source of their part of /openapi.json). */
import { envelopeSchema, t } from '#core/openapi/shapes'
import { MAX_API_KEYS } from '#identity/services/api_key_service'
import { defineContracts } from '#core/openapi/contracts'
import {
  AuthRequiredException,
  EmailNotVerifiedException,
  ForbiddenException,
  GoneException,
  RateLimitExceededException,
} from '#core/exceptions/api_exceptions'
import {
  apiKeyValidator,
  changePasswordValidator,
  forgotPasswordValidator,
  loginValidator,
  markReadValidator,
  refreshValidator,
  registerValidator,
  resendVerificationValidator,
  resetPasswordValidator,
} from '#identity/validators/auth_validators'

export default defineContracts({
  'auth.register': {
    summary: 'Create an account',
    description:
      'Sends a verification link by e-mail. The answer is the same whether or not the address could be registered. A taken username is 400 naming username. Sign-ups per client address are limited per day (429).',
    body: registerValidator,
    responses: {
      200: t.object({
        registered: t.boolean(),
        requiresVerification: t.boolean(),
        message: t.string(),
      }),
    },
    errors: [RateLimitExceededException],
  },
  'auth.verifyEmail': {
    summary: 'Verify an e-mail address',
    description:
      'The link from the verification mail (single use, 24 hours); 400 for an invalid or expired link. Answers a small HTML page to browsers, the envelope to JSON clients.',
    responses: {
      200: {
        description: 'Verified: the envelope, or a small HTML page for a browser',
        content: {
          'application/json': envelopeSchema(
            t.object({ verified: t.literal(true), message: t.string() })
          ),
          'text/html': { type: 'string' },
        },
      },
    },
  },
  'auth.resendVerification': {
    summary: 'Send a new verification link',
    description:
      'Neutral answer whatever the address; limited to 5 per address per hour (429 beyond).',
    body: resendVerificationValidator,
    responses: {
      200: t.object({
        sent: t.boolean(),
        message: t.string(),
      }),
    },
    errors: [RateLimitExceededException],
  },
  'auth.login': {
    summary: 'Sign in',
    description:
      'Verified accounts only (403 EMAIL_NOT_VERIFIED). Also sets the platform_refresh cookie. 10 failures per e-mail and client within 15 minutes give 429.',
    body: loginValidator,
    responses: {
      200: t.object({
        token: t.string(),
        refreshToken: t.string(),
        expiresIn: t.string(),
        user: t.object({
          id: t.uuid(),
          email: t.string(),
          username: t.string(),
          tier: t.string(),
        }),
      }),
    },
    errors: [
      AuthRequiredException,
      EmailNotVerifiedException,
      ForbiddenException,
      RateLimitExceededException,
    ],
  },
  'auth.password.forgot': {
    summary: 'Ask for a password reset link',
    description:
      'The same answer for every address; a verified account gets a link valid 30 minutes, once (at most 3 mails an hour per address; 429 after 20 requests an hour from one client).',
    body: forgotPasswordValidator,
    responses: {
      200: t.object({
        sent: t.boolean(),
      }),
    },
    errors: [RateLimitExceededException],
  },
  'auth.password.reset': {
    summary: "Choose a new password with a reset link's token",
    description:
      '400 naming token for an invalid, used or expired link. Every session of the account ends and every API key of the account is revoked (the password may have been stolen).',
    body: resetPasswordValidator,
    responses: {
      200: t.object({
        reset: t.boolean(),
      }),
    },
  },
  'auth.refresh': {
    summary: 'Rotate the refresh token',
    description:
      'Takes the refresh token from the body or the platform_refresh cookie; returns a new JWT and refresh token. Reusing a rotated token revokes its whole family.',
    body: refreshValidator,
    responses: {
      200: t.object({
        token: t.string(),
        refreshToken: t.string(),
        expiresIn: t.string(),
      }),
    },
    errors: [AuthRequiredException, ForbiddenException],
  },
  'auth.logout': {
    summary: 'Sign out',
    description:
      "Ends the JWT sent with it (`Authorization: Bearer <JWT>`: with the account's token version, every JWT of the account) and revokes the refresh token family (token from the body or cookie); clears the cookie. Either credential is enough.",
    body: refreshValidator,
    responses: {
      200: t.object({
        loggedOut: t.boolean(),
      }),
    },
  },
  'auth.exportDownload': {
    summary: 'Download a data export',
    description:
      'The mailed link. Needs its valid signature AND the owner signed in: a JWT in the Authorization header, or, for a browser opening the link, the HttpOnly platform_refresh cookie of a live session.',
    responses: {
      200: {
        description: 'The export archive',
        content: { 'application/zip': { type: 'string', format: 'binary' } },
      },
    },
    errors: [AuthRequiredException, ForbiddenException, GoneException],
  },
  'auth.apiKeys.store': {
    summary: 'Create an API key',
    description: `JWT; verified e-mail required. The full \`key\` is returned only here. An account holds at most ${MAX_API_KEYS} keys (400 beyond).`,
    body: apiKeyValidator,
    responses: {
      201: t.object({
        id: t.uuid(),
        label: t.string(),
        key: t.string(),
        prefix: t.string(),
        createdAt: t.dateTime(),
      }),
    },
    errors: [EmailNotVerifiedException],
  },
  'auth.password.change': {
    summary: 'Change the password',
    description:
      'JWT. The current password proves it (400 naming currentPassword when wrong). Every session of the account ends (JWTs and refresh tokens); the answer is a new session for this client. API keys keep working (a reset by mail revokes them).',
    body: changePasswordValidator,
    responses: {
      200: t.object({
        token: t.string(),
        refreshToken: t.string(),
        expiresIn: t.string(),
      }),
    },
  },
  'auth.apiKeys.index': {
    summary: 'List API keys',
    description: 'Without secrets.',
    responses: {
      200: t.object({
        apiKeys: t.array(
          t.object({
            id: t.uuid(),
            label: t.string(),
            prefix: t.string(),
            createdAt: t.dateTime(),
            lastUsedAt: t.nullable(t.dateTime()),
          })
        ),
      }),
    },
  },
  'auth.apiKeys.destroy': {
    summary: 'Revoke an API key',
    description: 'The key is refused from the next request on.',
    responses: {
      200: t.object({
        id: t.string(),
        revoked: t.literal(true),
      }),
    },
  },
  'auth.notifications.index': {
    summary: 'Unread notifications',
    description: 'Newest first (at most 100).',
    responses: {
      200: t.object({
        notifications: t.array(
          t.object({
            id: t.string(),
            type: t.string(),
            title: t.string(),
            body: t.string(),
            createdAt: t.dateTime(),
          })
        ),
      }),
    },
  },
  'auth.notifications.read': {
    summary: 'Mark notifications read',
    description: "Only the caller's own notifications change; other ids are ignored.",
    body: markReadValidator,
    responses: {
      200: t.object({
        updated: t.integer(),
      }),
    },
  },
  'auth.exportData': {
    summary: 'Export my data',
    description:
      'Prepares a ZIP (profile, API keys without secrets, notifications, tickets, AI Credit ledger, agents, conversations, configurations with secrets masked, payments) and e-mails a signed download link valid 7 days. One export at a time (a second request while one is in progress: 429).',
    responses: {
      200: t.object({
        status: t.string(),
        message: t.string(),
      }),
    },
    errors: [RateLimitExceededException],
  },
  'api.v1.me': {
    summary: 'My profile',
    description: 'API key. `platformCredits` is a legacy field, always 0.',
    responses: {
      200: t.object({
        id: t.uuid(),
        walletAddress: t.nullable(t.string()),
        referralCode: t.string(),
        platformCredits: t.integer(),
        aiCreditsBalance: t.integer(),
        createdAt: t.dateTime(),
      }),
    },
    errors: [RateLimitExceededException],
  },
  'api.v1.usage': {
    summary: 'Requests used today',
    description: 'API key. Counts this request too; resets at 00:00 UTC.',
    responses: {
      200: t.object({
        today: t.integer(),
        limit: t.integer(),
        remaining: t.integer(),
        resetAt: t.dateTime(),
      }),
    },
    errors: [RateLimitExceededException],
  },
})
