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
      'replies',
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

test.group('Support tickets: threads', () => {
  test('one ticket by id, 404 for another account or a bad id', async ({ client, assert }) => {
    const owner = await createUser()
    const created = await client
      .post('/support/tickets')
      .bearerToken(jwtFor(owner))
      .json({ subject: 'Thread', body: 'First message', category: 'technical' })
    const id = created.body().data.id
    const mine = await client.get(`/support/tickets/${id}`).bearerToken(jwtFor(owner))
    mine.assertStatus(200)
    assert.equal(mine.body().data.id, id)
    assert.deepEqual(mine.body().data.replies, [])
    for (const path of [`/support/tickets/${id}`, '/support/tickets/not-a-uuid']) {
      const other = await client.get(path).bearerToken(jwtFor(await createUser()))
      other.assertStatus(404)
      assert.equal(other.body().code, 'NOT_FOUND')
    }
  })

  test('the holder replies; the ticket waits for staff again; replies are validated', async ({
    client,
    assert,
  }) => {
    const owner = await createUser()
    const jwt = jwtFor(owner)
    const opened = await client
      .post('/support/tickets')
      .bearerToken(jwt)
      .json({ subject: 'Thread', body: 'First message', category: 'technical' })
    const id = opened.body().data.id
    const reply = await client
      .post(`/support/tickets/${id}/replies`)
      .bearerToken(jwt)
      .json({ body: 'More detail' })
    reply.assertStatus(201)
    assert.equal(reply.body().data.status, 'open')
    assert.deepEqual(
      reply.body().data.replies.map((r: any) => [r.author, r.body]),
      [['holder', 'More detail']]
    )
    const empty = await client
      .post(`/support/tickets/${id}/replies`)
      .bearerToken(jwt)
      .json({ body: '' })
    empty.assertStatus(400)
    assert.equal(empty.body().code, 'VALIDATION_ERROR')
    const foreign = await client
      .post(`/support/tickets/${id}/replies`)
      .bearerToken(jwtFor(await createUser()))
      .json({ body: 'hijack' })
    foreign.assertStatus(404)
    const list = await client.get('/support/tickets').bearerToken(jwt)
    assert.lengthOf(list.body().data.tickets[0].replies, 1)
  })
})
