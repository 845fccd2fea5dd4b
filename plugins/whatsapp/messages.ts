import type { WAMessage, WASocket } from 'baileys'
import type { ChannelConnectContext, ChannelReplier } from '#plugins/types'

/**
 * The message half of the WhatsApp connector: text of direct chats goes to
 * the ingress router, replies go back quoting the message. Only the parts of
 * a Baileys socket it uses are named, which is also the tests' seam.
 */
export type MessageSocket = Pick<WASocket, 'ev' | 'sendMessage' | 'sendPresenceUpdate'>

/** Person-to-person chats; groups (`@g.us`), broadcasts and newsletters are not answered. */
const DIRECT_CHAT = /@s\.whatsapp\.net$/

function textOf(message: WAMessage): string | undefined {
  return message.message?.conversation ?? message.message?.extendedTextMessage?.text ?? undefined
}

function replierFor(socket: MessageSocket, message: WAMessage): ChannelReplier {
  return {
    async send(target, text) {
      await socket.sendMessage(
        target.conversationId,
        { text },
        target.replyTo ? { quoted: message } : {}
      )
    },
    async typing(conversationId) {
      await socket.sendPresenceUpdate('composing', conversationId)
    },
  }
}

export function routeMessages(socket: MessageSocket, context: ChannelConnectContext) {
  socket.ev.on('messages.upsert', ({ messages, type }) => {
    // 'append' is history sync and messages sent from the phone: not new messages to answer.
    if (type !== 'notify') return
    for (const message of messages) {
      const jid = message.key.remoteJid
      const text = textOf(message)
      if (!jid || !text || !message.key.id || !DIRECT_CHAT.test(jid)) continue
      context
        .receive(
          {
            id: message.key.id,
            conversationId: jid,
            sender: { id: jid.split('@')[0], handle: message.pushName ?? undefined },
            text,
            fromSelf: message.key.fromMe ?? false,
          },
          replierFor(socket, message)
        )
        .catch((error) => context.log('whatsapp: routing failed', { error: String(error) }))
    }
  })
}
