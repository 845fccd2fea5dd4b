import vine from '@vinejs/vine'
import { isAddress } from '@solana/kit'

/** Control characters other than tab, LF, CR, and unpaired surrogates (CONTRACT.md "Text input"). */
const BAD_TEXT =
  // eslint-disable-next-line no-control-regex -- matching control characters is the point
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

const solanaAddress = vine.createRule((value, _options, field) => {
  if (typeof value !== 'string' || !isAddress(value)) {
    field.report(
      'The {{ field }} field must be a Solana address (base58, 32 bytes)',
      'address',
      field
    )
  }
})

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
