import type { HttpContext } from '@adonisjs/core/http'
import type { NextFn } from '@adonisjs/core/types/http'
import { ValidationException } from '#core/exceptions/api_exceptions'

/**
 * One gate for every route, before any query runs (CONTRACT.md, "Text
 * input"): a string anywhere in the route params, the query string or the
 * parsed body (object keys included) that holds a control character or an
 * unpaired UTF-16 surrogate is a 400 VALIDATION_ERROR naming the field.
 * PostgreSQL refuses NUL in text and JSON, and no client has a reason to
 * send the others; refusing at the door keeps them out of every table,
 * log line and framework config.
 *
 * Tab, line feed and carriage return are allowed in free text (body
 * values), except in fields that name or identify something, listed in
 * IDENTIFIER_FIELDS; params, query values and object keys allow none.
 */
// Matching control characters is the point here.
// eslint-disable-next-line no-control-regex
export const ANY_CONTROL = /[\u0000-\u001F\u007F-\u009F]/
// eslint-disable-next-line no-control-regex
export const CONTROL_BUT_WHITESPACE = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]/

/** Body fields that identify rather than say something: no line breaks or tabs either. */
export const IDENTIFIER_FIELDS = new Set([
  'email',
  'username',
  'password',
  'currentPassword',
  'newPassword',
  'label',
  'name',
  'slug',
  'filename',
  'path',
  'cron',
  'timezone',
  'channel',
  'skillId',
  'mintAddress',
  'address',
  'signature',
  'txSignature',
  'tier',
  'billingPeriod',
  'paymentToken',
  'addonKey',
  'refreshToken',
  'referralCode',
  'category',
  'role',
  'userId',
  'token',
  'code',
  'avatarUrl',
  'framework',
])

function describe(value: string): string | null {
  if (!value.isWellFormed()) return 'an unpaired UTF-16 surrogate'
  return null
}

function check(value: string, field: string, strict: boolean) {
  const malformed = describe(value)
  if (malformed) {
    throw new ValidationException(`The field "${field}" holds ${malformed}`)
  }
  if ((strict ? ANY_CONTROL : CONTROL_BUT_WHITESPACE).test(value)) {
    throw new ValidationException(`The field "${field}" holds a control character`)
  }
}

/** Most levels of arrays and objects one input may nest (JSON schemas in model requests included). */
export const MAX_INPUT_DEPTH = 256

function fieldName(parent: string, key: string | number): string {
  if (typeof key === 'number') return `${parent}[${key}]`
  return parent ? `${parent}.${key}` : key
}

/**
 * The gate's check for client input that arrives without an HTTP request
 * (WebSocket messages): throws the same 400 VALIDATION_ERROR naming the
 * field. Walks a parsed value without recursion (bodies may nest deeply).
 */
export function inspectInput(root: unknown, rootName: string, strictValues = false) {
  const stack: Array<{ value: unknown; name: string; key: string; depth: number }> = [
    { value: root, name: rootName, key: rootName, depth: 0 },
  ]
  while (stack.length > 0) {
    const { value, name, key, depth } = stack.pop()!
    if (typeof value === 'string') {
      check(value, name, strictValues || IDENTIFIER_FIELDS.has(key))
      continue
    }
    if (value === null || typeof value !== 'object') continue
    // Deeper than any legitimate body; past it, recursive code further on
    // (the framework's own helpers) would overflow the stack: a 500.
    if (depth >= MAX_INPUT_DEPTH) {
      throw new ValidationException(`The input nests deeper than ${MAX_INPUT_DEPTH} levels`)
    }
    if (Array.isArray(value)) {
      for (const [index, item] of value.entries()) {
        stack.push({ value: item, name: fieldName(name, index), key, depth: depth + 1 })
      }
    } else {
      for (const [childKey, child] of Object.entries(value)) {
        check(childKey, fieldName(name, childKey), true)
        stack.push({
          value: child,
          name: fieldName(name, childKey),
          key: childKey,
          depth: depth + 1,
        })
      }
    }
  }
}

// eslint-disable-next-line no-control-regex
const ALL_CONTROL_GLOBAL = /[\u0000-\u001F\u007F-\u009F]/g
// eslint-disable-next-line no-control-regex
const CONTROL_BUT_WHITESPACE_GLOBAL = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]/g

/**
 * For text a third party relays (channel messages), where refusing would
 * only drop someone's message: the same characters are removed instead
 * (unpaired surrogates become U+FFFD). `strict` removes tab and line
 * breaks too (identifiers).
 */
export function cleanText(value: string, strict = false): string {
  return value
    .toWellFormed()
    .replace(strict ? ALL_CONTROL_GLOBAL : CONTROL_BUT_WHITESPACE_GLOBAL, '')
}

export default class InputGateMiddleware {
  async handle(ctx: HttpContext, next: NextFn) {
    inspectInput(ctx.params, '', true)
    inspectInput(ctx.request.qs(), '', true)
    const body = ctx.request.body()
    // Every route takes an object; an array would be read as one keyed "0", "1"... and a
    // route whose fields are all optional accepted it.
    if (Array.isArray(body)) throw new ValidationException('The request body must be a JSON object')
    inspectInput(body, '', false)
    return next()
  }
}
