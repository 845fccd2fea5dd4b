import { randomBytes } from 'node:crypto'
import { DateTime } from 'luxon'
import db from '@adonisjs/lucid/services/db'
import {
  getBase58Encoder,
  getPublicKeyFromAddress,
  isAddress,
  isSignatureBytes,
  verifySignature,
  type SignatureBytes,
} from '@solana/kit'
import { appUrl } from '#config/app'
import { ValidationException } from '#core/exceptions/api_exceptions'
import User from '#identity/models/user'
import WalletNonce from '#billing/models/wallet_nonce'

/** How long a wallet-link challenge can be signed (issue 5). */
export const WALLET_NONCE_TTL_MINUTES = 10

const SERVICE_NAME = 'Agent Host'

export interface WalletChallenge {
  nonce: string
  /** The exact text to sign (UTF-8) with the wallet's signMessage. */
  message: string
  expiresAt: string
}

/**
 * The text a wallet signs to be linked: it names the service, the account
 * and the nonce, so a signature cannot be replayed for another account,
 * another service or a second time.
 */
export function walletLinkMessage(input: {
  user: { id: string; username: string }
  nonce: string
  issuedAt: DateTime
  expiresAt: DateTime
}): string {
  return [
    `${SERVICE_NAME} wants you to link this wallet to your account.`,
    '',
    `Service: ${appUrl}`,
    `Account: ${input.user.username} (${input.user.id})`,
    `Nonce: ${input.nonce}`,
    `Issued at: ${input.issuedAt.toUTC().toISO()}`,
    `Expires at: ${input.expiresAt.toUTC().toISO()}`,
  ].join('\n')
}

/**
 * POST /auth/wallet/nonce: a new challenge for the account, valid 10
 * minutes. Earlier unused challenges of the account stop working.
 */
export async function issueWalletChallenge(user: User): Promise<WalletChallenge> {
  const nonce = randomBytes(24).toString('base64url')
  const issuedAt = DateTime.utc()
  const expiresAt = issuedAt.plus({ minutes: WALLET_NONCE_TTL_MINUTES })
  const message = walletLinkMessage({ user, nonce, issuedAt, expiresAt })
  await db.transaction(async (trx) => {
    await WalletNonce.query({ client: trx }).where('user_id', user.id).whereNull('used_at').delete()
    await WalletNonce.create({ userId: user.id, nonce, message, expiresAt }, { client: trx })
  })
  return { nonce, message, expiresAt: expiresAt.toISO()! }
}

/** Signature bytes from base58 (what wallets and kit produce) or base64; null when neither. */
function decodeSignature(value: string): SignatureBytes | null {
  const candidates: (() => Uint8Array)[] = [
    () => new Uint8Array(getBase58Encoder().encode(value)),
    () => new Uint8Array(Buffer.from(value, 'base64')),
  ]
  for (const decode of candidates) {
    try {
      const bytes = decode()
      if (isSignatureBytes(bytes)) return bytes
    } catch {}
  }
  return null
}

const PG_UNIQUE_VIOLATION = '23505'
/** A wallet links to one account only (CONTRACT, Paying): 400, naming the field. */
const WALLET_TAKEN = 'This wallet is already linked to another account (field "address")'

/**
 * POST /auth/wallet: links `address` to the account when `signature` is the
 * wallet's ed25519 signature of the account's pending challenge. The
 * challenge is consumed (single use); a wallet already linked to another
 * account is refused with 409.
 */
export async function linkWallet(
  user: User,
  input: { address: string; signature: string }
): Promise<{ walletAddress: string }> {
  const address = input.address.trim()
  if (!isAddress(address)) {
    throw new ValidationException('address is not a valid Solana wallet address')
  }
  const signature = decodeSignature(input.signature.trim())
  if (!signature) {
    throw new ValidationException(
      'signature must be a 64-byte ed25519 signature (base58 or base64)'
    )
  }

  const challenge = await WalletNonce.query()
    .where('user_id', user.id)
    .whereNull('used_at')
    .where('expires_at', '>', DateTime.utc().toJSDate())
    .orderBy('created_at', 'desc')
    .first()
  if (!challenge) {
    throw new ValidationException(
      'No wallet challenge is pending for this account, or it expired: request one with POST /auth/wallet/nonce'
    )
  }

  let signed = false
  try {
    const key = await getPublicKeyFromAddress(address)
    signed = await verifySignature(key, signature, new TextEncoder().encode(challenge.message))
  } catch {
    // Not an ed25519 public key (an off-curve program address): it cannot have signed.
  }
  if (!signed) {
    throw new ValidationException(
      'The signature is not a signature of the pending challenge message by this wallet'
    )
  }

  const owner = await User.query().where('wallet_address', address).whereNot('id', user.id).first()
  if (owner) throw new ValidationException(WALLET_TAKEN)

  try {
    await db.transaction(async (trx) => {
      const consumed = await WalletNonce.query({ client: trx })
        .where('id', challenge.id)
        .whereNull('used_at')
        .update({ used_at: DateTime.utc().toJSDate() }, ['id'])
      if (consumed.length !== 1) {
        throw new ValidationException('This wallet challenge was already used')
      }
      const account = await User.query({ client: trx })
        .where('id', user.id)
        .forUpdate()
        .firstOrFail()
      account.walletAddress = address
      await account.useTransaction(trx).save()
    })
  } catch (error) {
    if ((error as { code?: string }).code === PG_UNIQUE_VIOLATION) {
      throw new ValidationException(WALLET_TAKEN)
    }
    throw error
  }
  return { walletAddress: address }
}
