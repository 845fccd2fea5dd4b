// The console's only script: times in the reader's zone, confirmations before
// destructive actions, and the live parts of pages over Transmit (SSE).
import { Transmit } from '/console/assets/transmit.js'

// Times: every <time data-relative datetime="...Z"> (the time component) is
// shown in the browser's zone, e.g. "27 Nov 2026, 16:04 (3 min ago)", the
// same way on every page; the relative part is kept fresh.
const absolute = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' })
const full = new Intl.DateTimeFormat(undefined, { dateStyle: 'full', timeStyle: 'long' })
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto', style: 'short' })
const STEPS = [
  ['second', 60],
  ['minute', 60],
  ['hour', 24],
  ['day', 30],
  ['month', 12],
  ['year', Infinity],
]

export function relativeTime(date, now = Date.now()) {
  let amount = (date.getTime() - now) / 1000
  if (Math.abs(amount) < 45) return amount <= 0 ? 'just now' : 'in a moment'
  for (const [unit, size] of STEPS) {
    if (Math.abs(amount) < size) return relative.format(Math.round(amount), unit)
    amount /= size
  }
  return ''
}

function renderTimes(root = document) {
  for (const element of root.querySelectorAll('time[data-relative]')) {
    const date = new Date(element.getAttribute('datetime'))
    if (Number.isNaN(date.getTime())) continue
    element.textContent = `${absolute.format(date)} (${relativeTime(date)})`
    element.title = full.format(date)
  }
}
renderTimes()
setInterval(renderTimes, 30_000)

// Destructive actions (stop, sleep, disable, close...) ask first: a form with
// data-confirm posts only once the reader says yes.
document.addEventListener('submit', (event) => {
  const form = event.target
  if (form instanceof HTMLFormElement && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
    event.preventDefault()
  }
})

// Live parts: an element with data-live-channel subscribes; data-live says
// what to do with a message.

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
      if (fresh) {
        element.innerHTML = fresh.innerHTML
        renderTimes(element)
      }
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
