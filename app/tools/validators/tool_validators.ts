import vine from '@vinejs/vine'
import { isAddress } from '@solana/kit'

/** Control characters other than tab, LF, CR, and unpaired surrogates (CONTRACT.md "Text input"). */
const BAD_TEXT =
  // eslint-disable-next-line no-control-regex -- matching control characters is the point
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/**
 * Solana addresses in JSON Schema: base58 text of 32 bytes. A pattern cannot
 * say "decodes to 32 bytes", so it states a part of them that always does
 * (44 characters, the first from 2 to G: values from 58^43 to 16 x 58^43,
 * below 2^256), which is what the document promises to accept.
 */
export const SOLANA_ADDRESS_SCHEMA = {
  type: 'string',
  pattern: '^[2-9A-G][1-9A-HJ-NP-Za-km-z]{43}$',
  description: 'A Solana address (base58 text of 32 bytes)',
}

const solanaAddress = vine.createRule(
  (value, _options, field) => {
    if (typeof value !== 'string' || !isAddress(value)) {
      field.report(
        'The {{ field }} field must be a Solana address (base58, 32 bytes)',
        'address',
        field
      )
    }
  },
  {
    toJSONSchema: (schema) => {
      Object.assign(schema, SOLANA_ADDRESS_SCHEMA)
    },
  }
)

const cleanText = vine.createRule((value, _options, field) => {
  if (typeof value === 'string' && BAD_TEXT.test(value)) {
    field.report('The {{ field }} field holds control characters or broken UTF-16', 'text', field)
  }
})

/** POST /agents/:id/scan-token (the address itself is checked by the service: 400 when not one). */
export const scanTokenValidator = vine.create({
  mintAddress: vine.string().trim().minLength(1).maxLength(64),
})

/** POST /agents/:id/research. */
export const researchValidator = vine.create({
  query: vine.string().trim().minLength(1).maxLength(4000).use(cleanText()),
})

/** POST /agents/:id/wallet-watch: 1 to 3 addresses. */
export const walletWatchValidator = vine.create({
  wallets: vine
    .array(vine.string().trim().maxLength(64).use(solanaAddress()))
    .minLength(1)
    .maxLength(3),
})
