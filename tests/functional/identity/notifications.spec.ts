import { test } from '@japa/runner'
import { randomUUID } from 'node:crypto'
import notificationService from '#identity/services/notification_service'
import { createUser, jwtFor } from '#tests/helpers/identity'

test.group('Notifications', () => {
  test('lists unread notifications, newest first', async ({ client, assert }) => {
    const user = await createUser()
    const first = await notificationService.notify(user.id, {
      type: 'agent_paused',
      title: 'Agent paused',
      body: 'Your plan ended.',
    })
    await new Promise((resolve) => setTimeout(resolve, 5))
    const second = await notificationService.notify(user.id, {
      type: 'payment_received',
      title: 'Payment received',
      body: 'Thank you.',
    })
    const stranger = await createUser()
    await notificationService.notify(stranger.id, {
      type: 'other',
      title: 'Not yours',
      body: '-',
    })

    const response = await client.get('/auth/notifications').bearerToken(jwtFor(user))
    response.assertStatus(200)
    const list = response.body().data.notifications
    assert.deepEqual(
      list.map((n: any) => n.id),
      [second.id, first.id]
    )
    assert.deepEqual(list[0], {
      id: second.id,
      type: 'payment_received',
      title: 'Payment received',
      body: 'Thank you.',
      createdAt: second.createdAt.toUTC().toISO(),
    })
  })

  test('mark read: own notifications only, others ignored', async ({ client, assert }) => {
    const user = await createUser()
    const other = await createUser()
    const mine = await notificationService.notify(user.id, { type: 't', title: 'a', body: 'b' })
    const keep = await notificationService.notify(user.id, { type: 't', title: 'c', body: 'd' })
    const theirs = await notificationService.notify(other.id, { type: 't', title: 'e', body: 'f' })

    const response = await client
      .patch('/auth/notifications/read')
      .bearerToken(jwtFor(user))
      .json({ ids: [mine.id, theirs.id, randomUUID(), 'not-a-uuid'] })
    response.assertStatus(200)
    assert.deepEqual(response.body().data, { updated: 1 })

    const mineNow = await client.get('/auth/notifications').bearerToken(jwtFor(user))
    assert.deepEqual(
      mineNow.body().data.notifications.map((n: any) => n.id),
      [keep.id]
    )
    const theirsNow = await client.get('/auth/notifications').bearerToken(jwtFor(other))
    assert.deepEqual(
      theirsNow.body().data.notifications.map((n: any) => n.id),
      [theirs.id]
    )
  })

  test('mark read validates ids', async ({ client, assert }) => {
    const jwt = jwtFor(await createUser())
    for (const body of [{}, { ids: 'x' }, { ids: [1, 2] }]) {
      const response = await client.patch('/auth/notifications/read').bearerToken(jwt).json(body)
      response.assertStatus(400)
      assert.equal(response.body().code, 'VALIDATION_ERROR')
    }
    const empty = await client.patch('/auth/notifications/read').bearerToken(jwt).json({ ids: [] })
    empty.assertStatus(200)
  })
})
