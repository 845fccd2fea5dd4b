import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { isAddress, type Address } from '@solana/kit'
import type { LocalChain } from '#tests/helpers/solana/local_chain'
import {
  accountValue,
  signatureStatus,
  transactionResult,
  wireBytes,
  type AccountEncoding,
  type TransactionEncoding,
} from '#tests/helpers/solana/rpc_shapes'

/** One JSON-RPC call the server received (for tests asserting what the client asked). */
export interface RpcCall {
  method: string
  params: unknown[]
}

class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string
  ) {
    super(message)
  }
}

const API_VERSION = '2.2.14'
const commitmentRank = { processed: 0, confirmed: 1, finalized: 2 } as const

/** JSON with bigints written as plain numbers, as a node prints u64 values. */
function stringify(value: unknown): string {
  return JSON.stringify(value, (_key, item) =>
    typeof item === 'bigint' ? `__bigint__${item}` : item
  ).replace(/"__bigint__(\d+)"/g, '$1')
}

function config(params: unknown[], index: number): Record<string, any> {
  const value = params[index]
  return value && typeof value === 'object' ? (value as Record<string, any>) : {}
}

function requireAddress(value: unknown): Address {
  if (typeof value !== 'string' || !isAddress(value)) {
    throw new RpcError(-32602, `Invalid param: Invalid`)
  }
  return value
}

/**
 * A Solana JSON-RPC node on 127.0.0.1 answering from a LocalChain:
 * getTransaction (base64, base58, jsonParsed; honours commitment and
 * maxSupportedTransactionVersion), getSignatureStatuses, getLatestBlockhash,
 * getAccountInfo (base64, base58, jsonParsed for token accounts and mints),
 * getBalance, getSignaturesForAddress, getSlot, getVersion, getHealth and sendTransaction.
 */
export class SolanaRpcServer {
  readonly calls: RpcCall[] = []
  /** When set, every request answers this HTTP status (a node that is down). */
  failWithStatus: number | null = null
  /** When set, requests are read and never answered (a node that hangs). */
  hang = false
  private server?: Server

  constructor(readonly chain: LocalChain) {}

  get url(): string {
    const address = this.server?.address() as AddressInfo | null
    if (!address) throw new Error('server not started')
    return `http://127.0.0.1:${address.port}`
  }

  /** Listens on `port` (0: a free one); a closed server may start again on its old port. */
  async start(port = 0): Promise<this> {
    this.server = createServer((request, response) => {
      const chunks: Buffer[] = []
      request.on('data', (chunk: Buffer) => chunks.push(chunk))
      request.on('end', () => {
        if (this.hang) return
        if (this.failWithStatus !== null) {
          response.writeHead(this.failWithStatus).end()
          return
        }
        let body: unknown
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
        } catch {
          response.writeHead(200, { 'content-type': 'application/json' })
          response.end(
            stringify({ jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' }, id: null })
          )
          return
        }
        const answer = Array.isArray(body)
          ? body.map((item) => this.handle(item))
          : this.handle(body)
        response.writeHead(200, { 'content-type': 'application/json' })
        response.end(stringify(answer))
      })
    })
    await new Promise<void>((resolve) => this.server!.listen(port, '127.0.0.1', resolve))
    return this
  }

  async close(): Promise<void> {
    const server = this.server
    this.server = undefined
    if (!server) return
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }

  /** Calls of one method, in order. */
  callsOf(method: string): RpcCall[] {
    return this.calls.filter((call) => call.method === method)
  }

  private handle(request: any) {
    const id = request?.id ?? null
    try {
      if (request?.jsonrpc !== '2.0' || typeof request.method !== 'string') {
        throw new RpcError(-32600, 'Invalid request')
      }
      const params = Array.isArray(request.params) ? request.params : []
      this.calls.push({ method: request.method, params })
      return { jsonrpc: '2.0', result: this.dispatch(request.method, params), id }
    } catch (error) {
      if (error instanceof RpcError) {
        return { jsonrpc: '2.0', error: { code: error.code, message: error.message }, id }
      }
      return {
        jsonrpc: '2.0',
        error: { code: -32603, message: `Internal error: ${(error as Error).message}` },
        id,
      }
    }
  }

  private context() {
    return { apiVersion: API_VERSION, slot: this.chain.slot }
  }

  private dispatch(method: string, params: unknown[]): unknown {
    switch (method) {
      case 'getTransaction':
        return this.getTransaction(params)
      case 'getSignatureStatuses':
        return this.getSignatureStatuses(params)
      case 'getLatestBlockhash':
        return {
          context: this.context(),
          value: {
            blockhash: this.chain.latestBlockhash(),
            lastValidBlockHeight: this.chain.slot + 150,
          },
        }
      case 'getAccountInfo': {
        const address = requireAddress(params[0])
        const encoding = (config(params, 1).encoding ?? 'base58') as AccountEncoding
        if (!['base58', 'base64', 'jsonParsed'].includes(encoding)) {
          throw new RpcError(-32602, `Invalid params: unknown encoding ${encoding}`)
        }
        return { context: this.context(), value: accountValue(this.chain, address, encoding) }
      }
      case 'getBalance':
        return {
          context: this.context(),
          value: this.chain.balance(requireAddress(params[0])),
        }
      case 'getSignaturesForAddress':
        return this.getSignaturesForAddress(params)
      case 'getSlot':
        return this.chain.slot
      case 'getVersion':
        return { 'feature-set': 3294202862, 'solana-core': API_VERSION }
      case 'getHealth':
        return 'ok'
      case 'sendTransaction': {
        const encoding = config(params, 1).encoding === 'base64' ? 'base64' : 'base58'
        const record = this.chain.execute(wireBytes(String(params[0]), encoding))
        return record.signature
      }
      default:
        throw new RpcError(-32601, 'Method not found')
    }
  }

  private getTransaction(params: unknown[]) {
    const signature = params[0]
    if (typeof signature !== 'string') throw new RpcError(-32602, 'Invalid param: Invalid')
    const options = config(params, 1)
    const encoding = (options.encoding ?? 'json') as TransactionEncoding | 'json'
    if (!['base64', 'base58', 'jsonParsed'].includes(encoding)) {
      throw new RpcError(-32602, `Invalid params: encoding ${encoding} is not served by this node`)
    }
    const commitment = (options.commitment ?? 'finalized') as keyof typeof commitmentRank
    if (commitmentRank[commitment] === undefined || commitment === 'processed') {
      throw new RpcError(-32602, 'Method does not support commitment below `confirmed`')
    }
    const record = this.chain.find(signature)
    if (!record || commitmentRank[record.commitment] < commitmentRank[commitment]) return null
    const max = options.maxSupportedTransactionVersion as number | undefined
    if (record.version === 0 && (max === undefined || max < 0)) {
      throw new RpcError(
        -32015,
        'Transaction version (0) is not supported by the requesting client. Please try the request again with the following configuration parameter: "maxSupportedTransactionVersion": 0'
      )
    }
    return transactionResult(record, encoding as TransactionEncoding, max)
  }

  /** Newest first, as a node lists them: every visible transaction naming the address. */
  private getSignaturesForAddress(params: unknown[]) {
    const address = requireAddress(params[0])
    const limit = Math.min(Number(config(params, 1).limit ?? 1000), 1000)
    return [...this.chain.transactions.values()]
      .filter((record) => !record.forgotten && record.accountKeys.includes(address))
      .sort((a, b) => b.slot - a.slot)
      .slice(0, limit)
      .map((record) => ({
        signature: record.signature,
        slot: record.slot,
        err: record.err,
        memo: null,
        blockTime: record.blockTime,
        confirmationStatus: record.commitment,
      }))
  }

  private getSignatureStatuses(params: unknown[]) {
    const signatures = params[0]
    if (!Array.isArray(signatures)) throw new RpcError(-32602, 'Invalid params')
    return {
      context: this.context(),
      value: signatures.map((signature) => {
        const record = this.chain.find(String(signature))
        return record ? signatureStatus(this.chain, record) : null
      }),
    }
  }
}

/** Starts a local Solana RPC node for a chain. */
export async function startSolanaRpc(chain: LocalChain): Promise<SolanaRpcServer> {
  return new SolanaRpcServer(chain).start()
}
