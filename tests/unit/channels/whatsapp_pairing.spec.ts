import { test } from '@japa/runner'
import { DisconnectReason, initAuthCreds } from 'baileys'
import { storedAuthState } from '../../../plugins/whatsapp/auth_state.ts'
import { connectionStep, phoneOf } from '../../../plugins/whatsapp/connection_events.ts'

/** A Baileys close error (a Boom: the status code under output). */
function closedWith(statusCode: number) {
  return Object.assign(new Error(`closed ${statusCode}`), { output: { statusCode } })
}

test.group('Channels: whatsapp pairing steps (Baileys connection.update)', () => {
  test('a QR becomes a PNG data URL with its raw text and a 60 s life', async ({ assert }) => {
    const raw = '2@abc,def,ghi,jkl'
    const step = await connectionStep({ qr: raw }, undefined)
    assert.equal(step.kind, 'report')
    if (step.kind !== 'report') return
    assert.equal(step.report.state, 'qr_pending')
    assert.equal(step.report.qr?.raw, raw)
    assert.equal(step.report.qr?.expiresIn, 60)
    const dataUrl = step.report.qr!.dataUrl
    assert.match(dataUrl, /^data:image\/png;base64,/)
    const png = Buffer.from(dataUrl.split(',')[1], 'base64')
    assert.deepEqual([...png.subarray(0, 8)], [137, 80, 78, 71, 13, 10, 26, 10], 'a PNG')
    const refreshed = await connectionStep({ qr: '2@another,ref' }, undefined)
    assert.notEqual(
      refreshed.kind === 'report' ? refreshed.report.qr?.dataUrl : '',
      dataUrl,
      'a refreshed QR is a new image'
    )
  })

  test('linked: connected with the phone of the device JID; logged out: logged_out; other closes reconnect', async ({
    assert,
  }) => {
    const open = await connectionStep(
      { connection: 'open' },
      { id: '15551234567:12@s.whatsapp.net' }
    )
    assert.deepEqual(open, {
      kind: 'report',
      report: { state: 'connected', identity: { phone: '+15551234567' } },
    })
    const loggedOut = await connectionStep(
      {
        connection: 'close',
        lastDisconnect: { error: closedWith(DisconnectReason.loggedOut), date: new Date() },
      },
      undefined
    )
    assert.equal(loggedOut.kind, 'logged_out')
    const restart = await connectionStep(
      {
        connection: 'close',
        lastDisconnect: { error: closedWith(DisconnectReason.restartRequired), date: new Date() },
      },
      undefined
    )
    assert.deepInclude(restart, { kind: 'reconnect', immediately: true })
    const lost = await connectionStep(
      {
        connection: 'close',
        lastDisconnect: { error: closedWith(DisconnectReason.connectionLost), date: new Date() },
      },
      undefined
    )
    assert.deepInclude(lost, { kind: 'reconnect', immediately: false })
    assert.deepEqual(await connectionStep({ isOnline: true }, undefined), { kind: 'none' })
    assert.isUndefined(phoneOf('status@broadcast'))
  })

  test('the auth state survives a reload: creds and Signal keys, Buffers included', async ({
    assert,
  }) => {
    let saved: unknown
    const store = {
      load: async <T>() => saved as T | undefined,
      save: async (value: unknown) => {
        saved = value
      },
    }
    const first = await storedAuthState(store)
    const creds = first.state.creds
    await first.state.keys.set({ 'pre-key': { '1': creds.signedIdentityKey } })
    await first.save()
    assert.isString(saved)

    const second = await storedAuthState(store)
    assert.deepEqual(
      Buffer.from(second.state.creds.noiseKey.private),
      Buffer.from(creds.noiseKey.private)
    )
    const keys = await second.state.keys.get('pre-key', ['1', '2'])
    assert.deepEqual(Buffer.from(keys['1'].public), Buffer.from(creds.signedIdentityKey.public))
    assert.notProperty(keys, '2')
    await second.state.keys.set({ 'pre-key': { '1': null } })
    const third = await storedAuthState(store)
    assert.deepEqual(await third.state.keys.get('pre-key', ['1']), {})
    assert.notDeepEqual(initAuthCreds().noiseKey, creds.noiseKey)
  })
})
