import { test } from '@japa/runner'
import { createUser, jwtFor } from '#tests/helpers/identity'

test.group('Support tickets', () => {
  test('open a ticket and list my tickets, newest first', async ({ client, assert }) => {
    const user = await createUser()
    const jwt = jwtFor(user)
    const first = await client.post('/support/tickets').bearerToken(jwt).json({
      subject: 'Agent paused',
      body: 'My agent shows paused since this morning.',
      category: 'technical',
    })
    first.assertStatus(201)
    const ticket = first.body().data
    assert.deepEqual(Object.keys(ticket).sort(), [
      'body',
      'category',
      'createdAt',
      'id',
      'status',
      'subject',
      'updatedAt',
    ])
    assert.equal(ticket.status, 'open')
    assert.equal(ticket.category, 'technical')
    assert.equal(new Date(ticket.createdAt).toISOString(), ticket.createdAt)

    await new Promise((resolve) => setTimeout(resolve, 5))
    const second = await client
      .post('/support/tickets')
      .bearerToken(jwt)
      .json({ subject: 'Invoice', body: 'Need an invoice.', category: 'billing' })
    second.assertStatus(201)

    await client
      .post('/support/tickets')
      .bearerToken(jwtFor(await createUser()))
      .json({ subject: 'Not yours', body: '...', category: 'other' })

    const list = await client.get('/support/tickets').bearerToken(jwt)
    list.assertStatus(200)
    assert.deepEqual(
      list.body().data.tickets.map((t: any) => t.id),
      [second.body().data.id, ticket.id]
    )
    assert.deepEqual(list.body().data.tickets[1], ticket)
  })

  test('{field} is validated: {why}')
    .with([
      { field: 'subject', why: 'too short', body: { subject: 'ab' } },
      { field: 'subject', why: 'too long', body: { subject: 's'.repeat(201) } },
      { field: 'body', why: 'empty', body: { body: '' } },
      { field: 'body', why: 'too long', body: { body: 'b'.repeat(10_001) } },
      { field: 'category', why: 'unknown', body: { category: 'sales' } },
      { field: 'category', why: 'missing', body: { category: undefined } },
    ])
    .run(async ({ client, assert }, row) => {
      const response = await client
        .post('/support/tickets')
        .bearerToken(jwtFor(await createUser()))
        .json({ subject: 'Valid subject', body: 'Valid body', category: 'account', ...row.body })
      response.assertStatus(400)
      assert.equal(response.body().code, 'VALIDATION_ERROR')
      assert.include(response.body().error, row.field)
    })

  test('boundaries and every category are accepted', async ({ client }) => {
    const jwt = jwtFor(await createUser())
    for (const category of ['technical', 'billing', 'account', 'other']) {
      const response = await client
        .post('/support/tickets')
        .bearerToken(jwt)
        .json({ subject: 'abc', body: 'b'.repeat(10_000), category })
      response.assertStatus(201)
    }
    const longSubject = await client
      .post('/support/tickets')
      .bearerToken(jwt)
      .json({ subject: 's'.repeat(200), body: 'x', category: 'other' })
    longSubject.assertStatus(201)
  })

  test('tickets need a JWT', async ({ client }) => {
    const response = await client.get('/support/tickets')
    response.assertStatus(401)
  })
})
