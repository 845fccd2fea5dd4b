import { test } from '@japa/runner'
import { randomUUID } from 'node:crypto'
import Agent from '#agents/models/agent'
import User, { type Role } from '#identity/models/user'
import SupportTicket from '#support/models/support_ticket'
import AgentPolicy from '#agents/policies/agent_policy'
import TicketPolicy from '#support/policies/ticket_policy'
import AccountPolicy from '#identity/policies/account_policy'
import { bouncerFor } from '#policies/main'
import { mapError, type MappedError } from '#core/http/error_envelope'

function account(role: Role = 'user'): User {
  const user = new User()
  user.id = randomUUID()
  user.role = role
  return user
}

function agentOf(owner: User): Agent {
  const agent = new Agent()
  agent.id = randomUUID()
  agent.userId = owner.id
  return agent
}

function ticketOf(holder: User): SupportTicket {
  const ticket = new SupportTicket()
  ticket.id = randomUUID()
  ticket.userId = holder.id
  return ticket
}

/** What `bouncer.authorize` makes of a check: null when allowed, else the API's answer. */
async function answerOf(
  check: Promise<void>
): Promise<Pick<MappedError, 'status' | 'body'> | null> {
  try {
    await check
    return null
  } catch (error) {
    const { status, body } = mapError(error)
    return { status, body }
  }
}

/** The message of a refusal (undefined when allowed). */
async function refusalOf(check: Promise<void>): Promise<string | undefined> {
  const answer = await answerOf(check)
  return answer?.body.error
}

const AGENT_ACTIONS = ['view', 'update', 'delete', 'operate', 'chat', 'useTools'] as const

test.group('Authorization: AgentPolicy', () => {
  test('the owner may do everything with the agent', async ({ assert }) => {
    const owner = account()
    const agent = agentOf(owner)
    for (const action of AGENT_ACTIONS) {
      assert.isNull(await answerOf(bouncerFor(owner).with(AgentPolicy).authorize(action, agent)))
    }
  })

  test("another account's agent is 403 FORBIDDEN on every action", async ({ assert }) => {
    const agent = agentOf(account())
    const stranger = bouncerFor(account()).with(AgentPolicy)
    for (const action of AGENT_ACTIONS) {
      assert.deepEqual(await answerOf(stranger.authorize(action, agent)), {
        status: 403,
        body: { success: false, error: 'This agent belongs to another account', code: 'FORBIDDEN' },
      })
    }
  })

  test('a logs token acts for the account it names: refused with the plain 403', async ({
    assert,
  }) => {
    const owner = account()
    const agent = agentOf(owner)
    const holder = (id: string) => bouncerFor({ id }).with(AgentPolicy)
    assert.isNull(await answerOf(holder(owner.id).authorize('followLogsWithToken', agent)))
    assert.deepEqual(await answerOf(holder(randomUUID()).authorize('followLogsWithToken', agent)), {
      status: 403,
      body: {
        success: false,
        error: 'You are not allowed to access this resource',
        code: 'FORBIDDEN',
      },
    })
  })

  test('a guest is refused (403) without the policy being asked', async ({ assert }) => {
    const answer = await answerOf(
      bouncerFor<User>(null).with(AgentPolicy).authorize('view', agentOf(account()))
    )
    assert.equal(answer?.status, 403)
    assert.equal(answer?.body.code, 'FORBIDDEN')
  })

  test('staff operate any agent from operator up', async ({ assert }) => {
    const agent = agentOf(account())
    for (const role of ['operator', 'admin'] as const) {
      const staff = bouncerFor(account(role)).with(AgentPolicy)
      assert.isTrue(await staff.allows('operateAsStaff', agent), role)
    }
    for (const role of ['user', 'support'] as const) {
      const answer = await answerOf(
        bouncerFor(account(role)).with(AgentPolicy).authorize('operateAsStaff', agent)
      )
      assert.deepEqual(answer?.body, {
        success: false,
        error: 'This needs the operator role',
        code: 'FORBIDDEN',
      })
    }
    // Staff are no owners: the owner's actions stay the owner's.
    assert.isFalse(await bouncerFor(account('admin')).with(AgentPolicy).allows('view', agent))
  })
})

test.group('Authorization: TicketPolicy', () => {
  test("the holder views and replies; another account's ticket is 404, staff included", async ({
    assert,
  }) => {
    const holder = account()
    const ticket = ticketOf(holder)
    for (const action of ['view', 'reply'] as const) {
      assert.isNull(await answerOf(bouncerFor(holder).with(TicketPolicy).authorize(action, ticket)))
      for (const other of [account(), account('admin')]) {
        assert.deepEqual(
          await answerOf(bouncerFor(other).with(TicketPolicy).authorize(action, ticket)),
          { status: 404, body: { success: false, error: 'Ticket not found', code: 'NOT_FOUND' } }
        )
      }
    }
  })

  test('support staff and above answer, set the status and assign any ticket', async ({
    assert,
  }) => {
    const ticket = ticketOf(account())
    for (const action of ['replyAsStaff', 'setStatus', 'assign'] as const) {
      for (const role of ['support', 'operator', 'admin'] as const) {
        assert.isTrue(
          await bouncerFor(account(role)).with(TicketPolicy).allows(action, ticket),
          role
        )
      }
      const answer = await answerOf(
        bouncerFor(account('user')).with(TicketPolicy).authorize(action, ticket)
      )
      assert.deepEqual(answer, {
        status: 403,
        body: { success: false, error: 'This needs the support role', code: 'FORBIDDEN' },
      })
    }
  })
})

test.group('Authorization: AccountPolicy', () => {
  test('granting AI Credits is for admins', async ({ assert }) => {
    assert.isTrue(await bouncerFor(account('admin')).with(AccountPolicy).allows('grantCredits'))
    for (const role of ['user', 'support', 'operator'] as const) {
      const answer = await answerOf(
        bouncerFor(account(role)).with(AccountPolicy).authorize('grantCredits')
      )
      assert.deepEqual(answer, {
        status: 403,
        body: {
          success: false,
          error: 'Only administrators can grant AI Credits',
          code: 'FORBIDDEN',
        },
      })
    }
  })

  test('admins set roles and disable accounts, never their own', async ({ assert }) => {
    const admin = account('admin')
    const target = account()
    const policy = bouncerFor(admin).with(AccountPolicy)
    assert.isTrue(await policy.allows('setRole', target))
    assert.isTrue(await policy.allows('setDisabled', target))
    assert.equal(
      await refusalOf(policy.authorize('setRole', admin)),
      'You cannot change your own role'
    )
    assert.equal(
      await refusalOf(policy.authorize('setDisabled', admin)),
      'You cannot disable your own account'
    )
    const operator = bouncerFor(account('operator')).with(AccountPolicy)
    assert.equal(
      await refusalOf(operator.authorize('setRole', target)),
      'This needs the admin role'
    )
  })

  test('plans from operator up, verification mails from support up', async ({ assert }) => {
    const target = account()
    const support = bouncerFor(account('support')).with(AccountPolicy)
    assert.isTrue(await support.allows('resendVerification', target))
    assert.equal(
      await refusalOf(support.authorize('setPlan', target)),
      'This needs the operator role'
    )
    const operator = bouncerFor(account('operator')).with(AccountPolicy)
    assert.isTrue(await operator.allows('setPlan', target))
    const user = bouncerFor(account('user')).with(AccountPolicy)
    assert.equal(
      await refusalOf(user.authorize('resendVerification', target)),
      'This needs the support role'
    )
  })
})
