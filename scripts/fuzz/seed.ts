/**
 * The state `npm run fuzz` puts in the service before schemathesis runs, all
 * through the public API as a user would: a verified account with an API key,
 * a linked wallet, a Pro plan and an AI Credits pack paid by real transactions
 * on the local chain and verified by the service, an open quote, an agent, a
 * support ticket and a referred second account.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { createSignableMessage, getBase58Decoder, type KeyPairSigner } from '@solana/kit'
import type { PaymentStandIns } from '#tests/helpers/solana/payment_stand_ins'

export interface Api {
  call(
    method: string,
    path: string,
    headers?: Record<string, string>,
    body?: unknown
  ): Promise<{ status: number; json: any; text: string }>
}

export interface Seeded {
  apiKey: string
  jwt: string
  /** Ids of seeded rows, by the path template whose parameter they fill. */
  pathIds: { path: string; param: string; value: string }[]
}

function expect(step: string, response: { status: number; text: string }, status = 200) {
  if (response.status !== status) {
    throw new Error(`seed ${step}: ${response.status} ${response.text.slice(0, 500)}`)
  }
}

/** Registers and verifies an account the real way (register, verification mail, login). */
async function verifiedAccount(
  api: Api,
  storage: string,
  name: string,
  referralCode?: string
): Promise<{ jwt: string; email: string }> {
  const stamp = Date.now().toString(36)
  const email = `${name}-${stamp}@example.test`
  const password = 'fuzz-password-123'
  expect(
    `register ${name}`,
    await api.call(
      'POST',
      '/auth/register',
      {},
      { email, username: `${name}_${stamp}`, password, ...(referralCode ? { referralCode } : {}) }
    )
  )

  let link: URL | undefined
  for (let i = 0; i < 100 && !link; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    const mailDir = join(storage, 'mail')
    for (const file of existsSync(mailDir) ? readdirSync(mailDir) : []) {
      if (!file.endsWith('.json')) continue
      const mail = JSON.parse(readFileSync(join(mailDir, file), 'utf8'))
      const match = /https?:\/\/\S+\/auth\/verify-email\/\S+/.exec(mail.text ?? '')
      if (mail.to.includes(email) && match) link = new URL(match[0])
    }
  }
  if (!link) throw new Error(`seed ${name}: no verification mail`)
  expect(`verify ${name}`, await api.call('GET', link.pathname, { accept: 'application/json' }))

  const login = await api.call('POST', '/auth/login', {}, { email, password })
  expect(`login ${name}`, login)
  return { jwt: login.json.data.token, email }
}

/** Links `wallet` to the account: the challenge signed as a wallet adapter's signMessage does. */
async function linkWallet(api: Api, auth: Record<string, string>, wallet: KeyPairSigner) {
  const nonce = await api.call('POST', '/auth/wallet/nonce', auth)
  expect('wallet nonce', nonce)
  const [signatures] = await wallet.signMessages([createSignableMessage(nonce.json.data.message)])
  const signature = getBase58Decoder().decode(signatures[wallet.address])
  expect(
    'wallet link',
    await api.call('POST', '/auth/wallet', auth, { address: wallet.address, signature })
  )
}

/** Quotes a purchase, pays exactly the quote (with its memo) from `wallet`, and submits it. */
async function buy(
  api: Api,
  payments: PaymentStandIns,
  auth: Record<string, string>,
  wallet: KeyPairSigner,
  purchase: { tier: string } | { addonKey: string },
  paymentToken: 'sol' | 'usdc'
) {
  const quote = await api.call('POST', '/features/quote', auth, { ...purchase, paymentToken })
  expect('quote', quote)
  const { amountBaseUnits, memo } = quote.json.data
  const tx =
    paymentToken === 'sol'
      ? await payments.chain.transferSol({
          from: wallet,
          to: payments.treasury,
          lamports: BigInt(amountBaseUnits),
          memo,
        })
      : await payments.chain.transferToken({
          mint: payments.usdc,
          from: wallet,
          toOwner: payments.treasury,
          amount: BigInt(amountBaseUnits),
          memo,
        })
  const route = 'tier' in purchase ? '/features/subscribe' : '/features/addon'
  expect(
    `pay ${route}`,
    await api.call('POST', route, auth, { ...purchase, paymentToken, txSignature: tx.signature })
  )
}

export async function seed(api: Api, storage: string, payments: PaymentStandIns): Promise<Seeded> {
  const { jwt } = await verifiedAccount(api, storage, 'fuzz')
  const auth = { authorization: `Bearer ${jwt}` }
  const key = await api.call('POST', '/auth/api-keys', auth, { label: 'fuzz' })
  expect('api key', key, 201)

  // Payments: a linked wallet holding SOL and USDC pays for Pro (SOL) and a
  // 25,000 AI Credits pack (USDC); one more quote stays open.
  const wallet = await payments.chain.wallet(5)
  await payments.chain.mintTo(payments.usdc, wallet.address, 100_000_000n)
  await linkWallet(api, auth, wallet)
  await buy(api, payments, auth, wallet, { tier: 'pro' }, 'sol')
  await buy(api, payments, auth, wallet, { addonKey: 'addon.ai_credits.25000' }, 'usdc')
  expect(
    'open quote',
    await api.call('POST', '/features/quote', auth, {
      addonKey: 'addon.agents.3',
      paymentToken: 'usdc',
    })
  )

  const agent = await api.call('POST', '/agents', auth, {
    name: 'fuzz-agent',
    framework: 'fixture',
  })
  if (agent.status >= 300) throw new Error(`seed agent: ${agent.status} ${agent.text}`)
  // Stopped at once: the fuzz exercises the agent's routes, not a running process.
  await api.call('POST', `/agents/${agent.json.data.id}/stop`, auth)

  const ticket = await api.call('POST', '/support/tickets', auth, {
    subject: 'Fuzz ticket',
    body: 'Seeded for the fuzz run.',
    category: 'other',
  })
  if (ticket.status >= 300) throw new Error(`seed ticket: ${ticket.status} ${ticket.text}`)

  // A second account registered with this one's referral code.
  const code = await api.call('GET', '/referrals/my-code', auth)
  expect('referral code', code)
  await verifiedAccount(api, storage, 'friend', code.json.data.referralCode)

  const agentId: string = agent.json.data.id
  return {
    apiKey: key.json.data.key as string,
    jwt,
    pathIds: [
      { path: '/agents/{id}', param: 'id', value: agentId },
      { path: '/api/v1/agents/{id}', param: 'id', value: agentId },
      { path: '/support/tickets/{id}', param: 'id', value: ticket.json.data.id },
      { path: '/referrals/validate/{code}', param: 'code', value: code.json.data.referralCode },
    ],
  }
}
