import { getAddressEncoder, getProgramDerivedAddress, type Address } from '@solana/kit'

/** Metaplex Token Metadata program (metadata accounts of classic SPL mints). */
export const METAPLEX_METADATA_PROGRAM =
  'metaqbxxUerdq28cj1RbAWkYQm3ybzjb6a8bt518x1s' as Address<'metaqbxxUerdq28cj1RbAWkYQm3ybzjb6a8bt518x1s'>

/** Token-2022 extension type of the embedded TokenMetadata (spl-token-metadata-interface). */
const TOKEN_METADATA_EXTENSION = 19
/** Account type byte after the 165-byte base of an extended Token-2022 account: 1 = mint. */
const ACCOUNT_TYPE_MINT = 1
const BASE_ACCOUNT_LENGTH = 165

export interface TokenNames {
  name: string
  symbol: string
}

const textDecoder = new TextDecoder('utf-8', { fatal: false })

/** Metaplex and the interface pad names with NUL bytes: strip them and outer blanks. */
function clean(text: string): string {
  return text.replaceAll('\u0000', '').trim()
}

/** A Borsh string (u32 little-endian length, UTF-8 bytes) at `offset`. */
function borshString(data: Uint8Array, offset: number): { value: string; next: number } | null {
  if (offset + 4 > data.length) return null
  const length = new DataView(data.buffer, data.byteOffset + offset, 4).getUint32(0, true)
  const start = offset + 4
  if (start + length > data.length) return null
  return {
    value: clean(textDecoder.decode(data.subarray(start, start + length))),
    next: start + length,
  }
}

/** The metadata account address of a mint: PDA of ["metadata", program, mint]. */
export async function metaplexMetadataAddress(mint: Address): Promise<Address> {
  const encoder = getAddressEncoder()
  const [address] = await getProgramDerivedAddress({
    programAddress: METAPLEX_METADATA_PROGRAM,
    seeds: ['metadata', encoder.encode(METAPLEX_METADATA_PROGRAM), encoder.encode(mint)],
  })
  return address
}

/**
 * Name and symbol of a Metaplex `MetadataV1` account: key (u8 = 4),
 * update authority (32), mint (32), then the Borsh strings name, symbol, uri.
 */
export function decodeMetaplexMetadata(data: Uint8Array): TokenNames | null {
  if (data.length < 1 + 32 + 32 + 8 || data[0] !== 4) return null
  const name = borshString(data, 65)
  const symbol = name && borshString(data, name.next)
  if (!name || !symbol) return null
  return { name: name.value, symbol: symbol.value }
}

/**
 * Name and symbol from a Token-2022 mint's TokenMetadata extension: after
 * the 165-byte base comes the account type, then TLV entries (u16 type, u16
 * length, value); the value holds update authority (32), mint (32), name,
 * symbol, uri as Borsh strings.
 */
export function decodeToken2022Metadata(data: Uint8Array): TokenNames | null {
  if (data.length <= BASE_ACCOUNT_LENGTH || data[BASE_ACCOUNT_LENGTH] !== ACCOUNT_TYPE_MINT) {
    return null
  }
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
  let offset = BASE_ACCOUNT_LENGTH + 1
  while (offset + 4 <= data.length) {
    const type = view.getUint16(offset, true)
    const length = view.getUint16(offset + 2, true)
    const value = offset + 4
    if (type === 0 || value + length > data.length) return null
    if (type === TOKEN_METADATA_EXTENSION) {
      const entry = data.subarray(value, value + length)
      const name = borshString(entry, 64)
      const symbol = name && borshString(entry, name.next)
      return name && symbol ? { name: name.value, symbol: symbol.value } : null
    }
    offset = value + length
  }
  return null
}
