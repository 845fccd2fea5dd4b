import { DisconnectReason, type ConnectionState } from 'baileys'
import QRCode from 'qrcode'
import type { ChannelStateReport } from '#plugins/types'

/**
 * What a Baileys `connection.update` means for the channel (one pure step,
 * so the whole pairing life cycle is tested without WhatsApp's servers):
 * a QR to show, linked, logged out, or a connection to open again.
 */
export type ConnectionStep =
  | { kind: 'report'; report: ChannelStateReport }
  | { kind: 'logged_out'; report: ChannelStateReport }
  | { kind: 'reconnect'; reason: string; immediately: boolean }
  | { kind: 'none' }

/** A pairing QR lives about 60 s (WhatsApp refreshes it; each refresh is reported). */
export const QR_LIFETIME_SECONDS = 60

/** `+<digits>` of a JID such as `15551234567:12@s.whatsapp.net`. */
export function phoneOf(jid: string | undefined): string | undefined {
  const digits = jid?.split(/[:@]/)[0]
  return digits && /^\d+$/.test(digits) ? `+${digits}` : undefined
}

function statusCodeOf(error: unknown): number | undefined {
  return (error as { output?: { statusCode?: number } } | undefined)?.output?.statusCode
}

export async function connectionStep(
  update: Partial<ConnectionState>,
  me: { id?: string } | undefined
): Promise<ConnectionStep> {
  if (update.qr) {
    return {
      kind: 'report',
      report: {
        state: 'qr_pending',
        qr: {
          // The raw QR text is kept too; a page shows the data URL as is.
          dataUrl: await QRCode.toDataURL(update.qr, { errorCorrectionLevel: 'L', margin: 2 }),
          raw: update.qr,
          expiresIn: QR_LIFETIME_SECONDS,
        },
      },
    }
  }
  if (update.connection === 'open') {
    const phone = phoneOf(me?.id)
    return { kind: 'report', report: { state: 'connected', identity: phone ? { phone } : {} } }
  }
  if (update.connection === 'close') {
    const code = statusCodeOf(update.lastDisconnect?.error)
    if (code === DisconnectReason.loggedOut) {
      return {
        kind: 'logged_out',
        report: {
          state: 'logged_out',
          error: 'WhatsApp logged this device out; pair again to reconnect',
        },
      }
    }
    // 515 comes right after a scan: WhatsApp asks for a fresh connection with the new keys.
    return {
      kind: 'reconnect',
      reason: update.lastDisconnect?.error?.message ?? 'connection closed',
      immediately: code === DisconnectReason.restartRequired,
    }
  }
  return { kind: 'none' }
}
