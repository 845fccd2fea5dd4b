import {
  BufferJSON,
  initAuthCreds,
  proto,
  type AuthenticationCreds,
  type AuthenticationState,
  type SignalDataTypeMap,
} from 'baileys'
import type { ChannelStore } from '#plugins/types'

/**
 * Baileys' auth state (credentials and Signal keys) kept as one JSON
 * document in the connection's store, which the service encrypts at rest:
 * like Baileys' useMultiFileAuthState, but in the database, so a linked
 * session survives restarts and moves with the connection to whichever
 * instance holds it.
 */
interface StoredAuth {
  creds: AuthenticationCreds
  keys: { [type: string]: { [id: string]: unknown } }
}

export async function storedAuthState(
  store: ChannelStore
): Promise<{ state: AuthenticationState; save: () => Promise<void> }> {
  const raw = await store.load<string>()
  const stored: StoredAuth = raw
    ? JSON.parse(raw, BufferJSON.reviver)
    : { creds: initAuthCreds(), keys: {} }
  const save = () => store.save(JSON.stringify(stored, BufferJSON.replacer))

  return {
    save,
    state: {
      creds: stored.creds,
      keys: {
        get<T extends keyof SignalDataTypeMap>(type: T, ids: string[]) {
          const found: { [id: string]: SignalDataTypeMap[T] } = {}
          for (const id of ids) {
            let value = stored.keys[type]?.[id]
            if (value === undefined || value === null) continue
            if (type === 'app-state-sync-key') {
              value = proto.Message.AppStateSyncKeyData.fromObject(value as object)
            }
            found[id] = value as SignalDataTypeMap[T]
          }
          return found
        },
        async set(data) {
          for (const [type, entries] of Object.entries(data)) {
            stored.keys[type] ??= {}
            for (const [id, value] of Object.entries(entries ?? {})) {
              if (value === null || value === undefined) delete stored.keys[type][id]
              else stored.keys[type][id] = value
            }
          }
          await save()
        },
      },
    },
  }
}
