/** What the chat routes take and answer (the source of their part of /openapi.json). */
import { sseEventSchema, t } from '#core/openapi/shapes'
import { defineContracts } from '#core/openapi/contracts'
import {
  AgentNotRunningException,
  AuthRequiredException,
  ContentBlockedException,
  ForbiddenException,
  InsufficientCreditsException,
  RateLimitExceededException,
  ServiceUnavailableException,
} from '#core/exceptions/api_exceptions'
import {
  chatValidator,
  replaceHistoryValidator,
  testChatValidator,
  webhookChatValidator,
} from '#chat/validators/chat_validators'

/** A chat answer: the reply and the model that wrote it. */
const chatAnswer = t.named('ChatAnswer', t.object({ content: t.string(), model: t.string() }))

/** What a chat turn can meet besides bad input: credits, the safety filter, the limits. */
const chatFailures = [
  InsufficientCreditsException,
  ContentBlockedException,
  RateLimitExceededException,
  ServiceUnavailableException,
]

export default defineContracts({
  'api.v1.agents.chat': {
    summary: 'Chat with an agent (one reply)',
    description:
      "API key; counts against the daily quota. Routed to the agent's running container, else the customer's provider key, else the hosted model (AI Credits; 402 INSUFFICIENT_CREDITS at a balance of 0). `history` replaces the stored context. 422 CONTENT_BLOCKED when the safety filter refuses the message. An `Idempotency-Key` header makes a retry within 24 h return the first answer without running or charging again (409 while the first is still running).",
    body: chatValidator,
    responses: { 200: chatAnswer },
    errors: [ForbiddenException, ...chatFailures],
  },
  'agents.testChat': {
    summary: 'Try a system prompt',
    description:
      'JWT. One reply from the hosted model for `systemPrompt` + `message`; nothing is stored; AI Credits are charged like any hosted call (402 at a balance of 0). Supports `Idempotency-Key`.',
    body: testChatValidator,
    responses: { 200: t.object({ text: t.string(), model: t.optional(t.string()) }) },
    errors: chatFailures,
  },
  'agents.chat.stream': {
    summary: 'Chat with an agent (SSE stream)',
    description:
      'JWT. `text/event-stream`: `data: {"token": "..."}` per chunk, then `data: [DONE]`; a failure after the stream began is `data: {"error": "..."}` then `data: [DONE]`; a `: heartbeat` comment every 15 s. Failures before the stream begins (validation, 422, 402) are JSON errors. Closing the connection cancels the model call; only what was generated is charged. Supports `Idempotency-Key` (a retry replays the stored answer as one token event).',
    body: chatValidator,
    errors: [ForbiddenException, ...chatFailures],
    responses: {
      200: {
        description:
          'Server-sent events: `data: {"token": "..."}` per chunk, then `data: [DONE]` (an error after the start: `data: {"error": "..."}`, then `data: [DONE]`)',
        content: {
          'text/event-stream': sseEventSchema(
            'JSON `{"token": "..."}` per chunk, `{"error": "..."}` after a failure, then `[DONE]`'
          ),
        },
      },
    },
  },
  'agents.chat.history': {
    summary: 'Stored conversation',
    description:
      "The agent's stored messages, oldest first: the newest 200 of the last 30 days. `ts` is Unix time in milliseconds.",
    responses: {
      200: t.object({
        messages: t.array(
          t.object({
            role: t.string(),
            content: t.string(),
            ts: t.integer(),
          })
        ),
      }),
    },
  },
  'agents.chat.history.replace': {
    summary: 'Replace the stored conversation',
    description:
      'The given messages (at most 200) become the whole stored history. Counters and analytics are not changed.',
    body: replaceHistoryValidator,
    responses: {
      200: t.object({
        saved: t.integer(),
      }),
    },
  },
  'agents.chat.history.clear': {
    summary: 'Clear the stored conversation',
    description: 'Counters and analytics are not changed.',
    responses: {
      200: t.object({
        cleared: t.boolean(),
      }),
    },
  },
  'agents.analytics': {
    summary: 'Messages per day',
    description:
      'Processed messages (user messages answered, on every channel) per UTC day for the last 7 days including today, oldest first; days without messages are 0. `avgPerDay` = total / 7, two decimals.',
    responses: {
      200: t.object({
        days: t.array(
          t.object({
            date: t.string(),
            messages: t.integer(),
          })
        ),
        total: t.integer(),
        peak: t.integer(),
        avgPerDay: t.number(),
      }),
    },
  },
  'agents.webhookUrl': {
    summary: 'Inbound webhook URL',
    description:
      'POST `{ message }` to this URL to chat with the agent without other credentials. The token in the path is a secret (256 random bits) that belongs to this agent.',
    responses: {
      200: t.object({
        webhookUrl: t.string(),
        method: t.string(),
        body: t.object({
          message: t.string(),
        }),
      }),
    },
  },
  'webhooks.inbound': {
    summary: 'Inbound webhook',
    description:
      'No credential but the token in the path (unknown token: 404). Answers like the programmatic chat. Rate limited per token (30 per minute: 429 RATE_LIMIT_EXCEEDED). Supports `Idempotency-Key`.',
    body: webhookChatValidator,
    responses: { 200: chatAnswer },
    errors: chatFailures,
  },
  'modelProxy.completions': {
    summary: 'Model proxy: chat completions (OpenAI-compatible)',
    description:
      "Authenticated by an agent's proxy token (`Bearer apx_...`: the agent owner pays) or a user's API key (`Bearer hk_...`: that user pays); a JWT is 401. Forwarded to MODEL_API_URL (or answered by the built-in `local-dev` model); AI Credits pay by tokens used, held before the upstream is called for the whole forwarded body plus its output limit (402 INSUFFICIENT_CREDITS when the balance cannot cover that). A model that is not offered is 400 VALIDATION_ERROR naming `model`. `stream: true` answers OpenAI chunks as SSE. The answer is OpenAI's, not the envelope; failures are in the envelope.",
    tag: 'v1',
    body: t.object({
      messages: t.array(t.anyObject(), { minItems: 1 }),
      model: t.optional(t.string()),
      stream: t.optional(t.boolean()),
    }),
    responses: {
      200: {
        description: 'An OpenAI chat completion; with `stream: true` OpenAI chunks as SSE',
        content: {
          'application/json': t.object({
            id: t.string(),
            object: t.string(),
            created: t.integer(),
            model: t.string(),
            choices: t.array(t.anyObject()),
          }).schema,
          'text/event-stream': sseEventSchema('An OpenAI chunk as JSON, then `[DONE]`'),
        },
      },
    },
    errors: [
      AuthRequiredException,
      AgentNotRunningException,
      InsufficientCreditsException,
      RateLimitExceededException,
      ServiceUnavailableException,
    ],
  },
  'modelProxy.models': {
    summary: 'Model proxy: models (OpenAI-compatible)',
    description:
      "The upstream's models that requests may name (MODEL_ALLOWLIST, by default MODEL_NAME and the models of the rate table) plus the built-in `local-dev`; only `local-dev` without MODEL_API_URL. The answer is OpenAI's list, not the envelope.",
    tag: 'v1',
    responses: {
      200: {
        description: 'An OpenAI model list',
        content: {
          'application/json': t.object({
            object: t.literal('list'),
            data: t.array(
              t.object({
                id: t.string(),
                object: t.string(),
                created: t.integer(),
                owned_by: t.string(),
              })
            ),
          }).schema,
        },
      },
    },
    errors: [AuthRequiredException, AgentNotRunningException],
  },
})
