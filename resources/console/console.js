// Live parts of console pages, over Transmit (Server-Sent Events). An element
// with data-live-channel subscribes; data-live says what to do with a message.
import { Transmit } from '/console/assets/transmit.js'

const live = document.querySelectorAll('[data-live-channel]')
if (live.length > 0) {
  const transmit = new Transmit({ baseUrl: window.location.origin })

  const handlers = {
    // Re-fetch this page and swap in the element's new content (no reload).
    // The header makes the server leave the session as it is (see
    // console_session_middleware.ts): this may run while a form is posting.
    async refresh(element) {
      const answer = await fetch(window.location.href, {
        credentials: 'same-origin',
        headers: { 'X-Console-Refresh': '1' },
      })
      if (!answer.ok) return
      const page = new DOMParser().parseFromString(await answer.text(), 'text/html')
      const fresh = page.getElementById(element.id)
      if (fresh) element.innerHTML = fresh.innerHTML
    },
    logs(element, message) {
      const text = message.line ?? (message.notice ? `[${message.notice}]` : '')
      if (!text) return
      if (element.dataset.empty !== 'false') {
        if (element.textContent.trim() === 'No log output yet.') element.textContent = ''
        element.dataset.empty = 'false'
      }
      element.textContent += (element.textContent.endsWith('\n') || !element.textContent ? '' : '\n') + text
      element.scrollTop = element.scrollHeight
    },
    // Fill each [data-figure="a.b"] inside the element from the message.
    figures(element, figures) {
      for (const target of element.querySelectorAll('[data-figure]')) {
        const value = target.dataset.figure.split('.').reduce((v, key) => (v == null ? v : v[key]), figures)
        if (value !== undefined && value !== null) {
          target.textContent = typeof value === 'number' && !Number.isInteger(value) ? value.toFixed(2) : String(value)
        }
      }
    },
  }

  for (const element of live) {
    const handler = handlers[element.dataset.live]
    const subscription = transmit.subscription(element.dataset.liveChannel)
    subscription.onMessage((message) => handler(element, message))
    subscription.create().then(() => element.setAttribute('data-live-ready', 'true'))
  }
}
