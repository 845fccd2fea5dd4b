import { randomUUID } from 'node:crypto'
import { test } from '@japa/runner'
import type { ApiClient } from '@japa/api-client'
import db from '@adonisjs/lucid/services/db'
import creditLedger from '#credits/services/credit_ledger'
import { ConsoleVisitor } from '#tests/helpers/console'
import { createUser, jwtFor } from '#tests/helpers/identity'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { baseUrl } from '#tests/helpers/http'
import { browserForGroup, haveChromium, NO_CHROMIUM, signIn } from '#tests/helpers/browser'
import {
  agentOwners,
  createFixtureAgent,
  readWorkspaceFile,
  waitUntilServing,
  writeWorkspaceFile,
} from '#tests/helpers/agents_http'

/**
 * Issue 29 item 6: the agent page shows backups and budgets; an operator
 * restores a backup for the holder of a ticket (docs/console.md).
 */

/** A serving fixture agent of `owner` whose notes.txt is `content`, and a manual backup of it. */
async function agentWithBackup(client: ApiClient, owner: { id: string }, content: string) {
  const jwt = jwtFor(owner)
  const agent = await createFixtureAgent(client, owner)
  await waitUntilServing(agent.id)
  await writeWorkspaceFile(client, jwt, agent.id, 'notes.txt', content)
  const backup = await backUp(client, jwt, agent.id)
  return { agent, jwt, backup }
}

async function backUp(client: ApiClient, jwt: string, agentId: string) {
  const made = await client.post(`/agents/${agentId}/backups`).bearerToken(jwt).json({})
  made.assertStatus(201)
  await waitUntilServing(agentId)
  return made.body().data as { id: string; kind: string; sha256: string; createdAt: string }
}

async function backupKinds(client: ApiClient, jwt: string, agentId: string): Promise<string[]> {
  const list = await client.get(`/agents/${agentId}/backups`).bearerToken(jwt)
  list.assertStatus(200)
  return list.body().data.backups.map((backup: any) => backup.kind)
}

async function ticketOf(client: ApiClient, holder: { id: string }): Promise<string> {
  const created = await client.post('/support/tickets').bearerToken(jwtFor(holder)).json({
    subject: 'My agent forgot everything',
    body: 'Please restore it',
    category: 'technical',
  })
  created.assertStatus(201)
  return created.body().data.id
}

/** The text of the element with this id (tags dropped, white space collapsed). */
function textOf(html: string, id: string): string {
  const start = html.indexOf(`id="${id}"`)
  if (start < 0) return ''
  const end = html.indexOf('</section>', start)
  return html
    .slice(start, end)
    .replace(/<[^>]+>/g, ' ')
    .replace(/\s+/g, ' ')
    .trim()
}

async function restoreAudits(agentIds: string[]) {
  return db
    .from('audit_entries')
    .whereIn('target_id', agentIds)
    .where('action', 'agent.restore_backup')
}

test.group('Console: backups and budgets', (group) => {
  const owners = agentOwners({ tier: 'pro', credits: 10_000 })
  group.teardown(() => owners.removeAgents())

  test("an operator restores the holder's backup from a ticket: the file comes back, the ticket and the audit trail say so", async ({
    assert,
    client,
  }) => {
    const owner = await owners.create()
    const { agent, jwt, backup } = await agentWithBackup(client, owner, 'before the backup')
    await writeWorkspaceFile(client, jwt, agent.id, 'notes.txt', 'changed after the backup')
    const ticketId = await ticketOf(client, owner)
    const path = `/console/support/${ticketId}`

    const operatorUser = await createUser({ role: 'operator' })
    const operator = await ConsoleVisitor.signedIn(operatorUser)
    const page = await operator.get(path)
    assert.include(page.html, `id="restore-${agent.id}"`)
    assert.include(page.html, `<option value="${backup.id}"`)
    const restored = await operator.post(`${path}/restore`, {
      agentId: agent.id,
      backupId: backup.id,
    })
    assert.equal(restored.status, 302)
    assert.equal(restored.location, path)

    const landed = await operator.get(path)
    assert.include(landed.html, 'restored to its manual backup')
    await waitUntilServing(agent.id)
    assert.equal(await readWorkspaceFile(client, jwt, agent.id, 'notes.txt'), 'before the backup')
    // The state before the restore was saved first, and holds the changed file.
    assert.deepEqual(await backupKinds(client, jwt, agent.id), ['pre-restore', 'manual'])
    const preRestore = await db
      .from('agent_backups')
      .where({ agent_id: agent.id, kind: 'pre-restore' })
      .firstOrFail()
    assert.include(landed.html, preRestore.id, 'the notice names the pre-restore backup')

    // An internal note on the ticket: staff see it, the holder does not.
    const notes = await db.from('support_ticket_replies').where('ticket_id', ticketId)
    assert.lengthOf(notes, 1)
    assert.isTrue(notes[0].internal)
    assert.include(notes[0].body, `backup ${backup.id}`)
    assert.include(notes[0].body, `pre-restore backup ${preRestore.id}`)
    assert.include(landed.html, 'Internal note')
    const holderView = await client.get(`/support/tickets/${ticketId}`).bearerToken(jwt)
    assert.deepEqual(holderView.body().data.replies, [])
    assert.equal(holderView.body().data.status, 'open')

    const [entry] = await restoreAudits([agent.id])
    assert.equal(entry.actor_email, operatorUser.email)
    assert.deepEqual(entry.after, {
      restoredFrom: backup.id,
      preRestoreBackup: preRestore.id,
      ticketId,
    })
  }).timeout(120_000)

  test('support sees backups and budgets on the agent page but has no restore form, and a forged restore is refused', async ({
    assert,
    client,
  }) => {
    const owner = await owners.create()
    const { agent, jwt, backup } = await agentWithBackup(client, owner, 'before the backup')
    await writeWorkspaceFile(client, jwt, agent.id, 'notes.txt', 'changed after the backup')
    const ticketId = await ticketOf(client, owner)

    const support = await ConsoleVisitor.signedIn(await createUser({ role: 'support' }))
    const agentPage = await support.get(`/console/agents/${agent.id}`)
    assert.equal(agentPage.status, 200)
    const backups = textOf(agentPage.html, 'agent-backups')
    assert.include(backups, `manual`)
    assert.include(backups, backup.sha256.slice(0, 12))
    assert.notInclude(backups, backup.sha256, 'the hash shows in its short form')
    assert.include(textOf(agentPage.html, 'agent-budget'), 'This agent none')

    const ticketPage = await support.get(`/console/support/${ticketId}`)
    assert.equal(ticketPage.status, 200)
    assert.notInclude(ticketPage.html, 'id="ticket-restore"')
    // A forged form with the page's own valid CSRF token.
    const forged = await support.post(`/console/support/${ticketId}/restore`, {
      agentId: agent.id,
      backupId: backup.id,
    })
    assert.equal(forged.status, 403)
    assert.equal(
      await readWorkspaceFile(client, jwt, agent.id, 'notes.txt'),
      'changed after the backup'
    )
    assert.deepEqual(await backupKinds(client, jwt, agent.id), ['manual'])
    assert.lengthOf(await restoreAudits([agent.id]), 0)
  }).timeout(120_000)

  test("a foreign backup, another account's agent, malformed ids and a missing CSRF token are refused and change nothing", async ({
    assert,
    client,
  }) => {
    const holder = await owners.create()
    const stranger = await owners.create()
    const own = await agentWithBackup(client, holder, 'holder before')
    const foreign = await agentWithBackup(client, stranger, 'stranger before')
    await writeWorkspaceFile(client, own.jwt, own.agent.id, 'notes.txt', 'holder after')
    await writeWorkspaceFile(client, foreign.jwt, foreign.agent.id, 'notes.txt', 'stranger after')
    const ticketId = await ticketOf(client, holder)
    const path = `/console/support/${ticketId}`

    const operator = await ConsoleVisitor.signedIn(await createUser({ role: 'operator' }))
    const page = await operator.get(path)
    assert.notInclude(page.html, foreign.backup.id, "only the holder's backups are offered")

    const attempts: { fields: Record<string, string>; status: number; says: string }[] = [
      {
        fields: { agentId: own.agent.id, backupId: foreign.backup.id },
        status: 404,
        says: 'Backup not found',
      },
      {
        fields: { agentId: foreign.agent.id, backupId: foreign.backup.id },
        status: 403,
        says: 'This agent is not the ticket holder',
      },
      {
        fields: { agentId: own.agent.id, backupId: 'not-a-uuid' },
        status: 400,
        says: 'backupId',
      },
      { fields: { agentId: 'nope', backupId: own.backup.id }, status: 400, says: 'agentId' },
      {
        fields: { agentId: randomUUID(), backupId: own.backup.id },
        status: 404,
        says: 'Agent not found',
      },
      { fields: { backupId: own.backup.id }, status: 400, says: 'agentId' },
    ]
    for (const { fields, status, says } of attempts) {
      await operator.get(path)
      const answer = await operator.post(`${path}/restore`, fields)
      assert.equal(answer.status, status, JSON.stringify(fields))
      assert.include(answer.html, says, JSON.stringify(fields))
    }
    await operator.get(path)
    const noToken = await operator.post(
      `${path}/restore`,
      { agentId: own.agent.id, backupId: own.backup.id },
      { csrf: false }
    )
    assert.equal(noToken.status, 403)

    assert.equal(
      await readWorkspaceFile(client, own.jwt, own.agent.id, 'notes.txt'),
      'holder after'
    )
    assert.equal(
      await readWorkspaceFile(client, foreign.jwt, foreign.agent.id, 'notes.txt'),
      'stranger after'
    )
    assert.deepEqual(await backupKinds(client, own.jwt, own.agent.id), ['manual'])
    assert.deepEqual(await backupKinds(client, foreign.jwt, foreign.agent.id), ['manual'])
    assert.lengthOf(await restoreAudits([own.agent.id, foreign.agent.id]), 0)
    assert.lengthOf(await db.from('support_ticket_replies').where('ticket_id', ticketId), 0)
  }).timeout(180_000)

  test("the agent page shows the agent's and the owner account's monthly budget, use, percent and whether it is over", async ({
    assert,
    client,
  }) => {
    const owner = await createUser({ credits: 100_000 })
    const budgeted = await createAgentFor(owner, {
      config: { personality: 'Budgeted', budget: { monthlyCredits: 1000 } },
    })
    const unbudgeted = await createAgentFor(owner, { name: 'No budget' })
    const put = await client
      .put('/ai-credits/budget')
      .bearerToken(jwtFor(owner))
      .json({ monthlyCredits: 5000 })
    put.assertStatus(200)
    const spend = (credits: number, agentId: string | null) =>
      creditLedger.debit(owner.id, credits, {
        kind: 'llm',
        provider: 'test',
        model: 'metered-model',
        metadata: { source: 'test', agentId },
      })
    await spend(1200, budgeted.id)
    await spend(300, null)
    // Last month's spending does not count.
    await spend(700, budgeted.id)
    await db
      .from('credit_ledger')
      .where('user_id', owner.id)
      .where('credits', -700)
      .update({ created_at: new Date(Date.now() - 40 * 86_400_000) })

    const support = await ConsoleVisitor.signedIn(await createUser({ role: 'support' }))
    const page = await support.get(`/console/agents/${budgeted.id}`)
    const budget = textOf(page.html, 'agent-budget')
    assert.include(budget, 'This agent 1000 1200 120 % over budget')
    assert.include(budget, 'The owner account 5000 1500 30 % within budget')
    assert.include(budget, new Date().toISOString().slice(0, 7))
    assert.include(textOf(page.html, 'agent-backups'), 'No backups yet.')

    const other = await support.get(`/console/agents/${unbudgeted.id}`)
    const otherBudget = textOf(other.html, 'agent-budget')
    assert.include(otherBudget, 'This agent none 0 - no budget')
    assert.include(otherBudget, 'The owner account 5000 1500 30 % within budget')
  })
})

test.group('Console: restoring a backup in a real browser (Chromium)', (group) => {
  const browser = browserForGroup(group)
  const owners = agentOwners({ tier: 'pro', credits: 10_000 })
  group.teardown(() => owners.removeAgents())

  test('an operator picks the older of two backups on the ticket, confirms, and the agent is back to it', async ({
    assert,
    client,
  }) => {
    const owner = await owners.create()
    const { agent, jwt, backup: first } = await agentWithBackup(client, owner, 'first version')
    await writeWorkspaceFile(client, jwt, agent.id, 'notes.txt', 'second version')
    const second = await backUp(client, jwt, agent.id)
    await writeWorkspaceFile(client, jwt, agent.id, 'notes.txt', 'third version')
    const ticketId = await ticketOf(client, owner)

    const page = await browser.newPage()
    try {
      await signIn(page, await createUser({ role: 'operator' }))
      await page.goto(`${baseUrl()}/console/support/${ticketId}`)
      const select = page.locator(`#backup-${agent.id}`)
      assert.equal(await select.inputValue(), second.id, 'the newest is offered first')
      await select.selectOption(first.id)
      const asked: string[] = []
      page.once('dialog', (dialog) => {
        asked.push(dialog.message())
        void dialog.accept()
      })
      await page.locator(`#restore-${agent.id}`).getByRole('button', { name: 'Restore' }).click()
      await page.locator('p.notice', { hasText: 'restored to its manual backup' }).waitFor({
        timeout: 60_000,
      })
      assert.lengthOf(asked, 1)
      assert.include(asked[0], 'Its current state is saved first')
      await page.locator('#ticket-thread', { hasText: `backup ${first.id}` }).waitFor()
      await waitUntilServing(agent.id)
      assert.equal(await readWorkspaceFile(client, jwt, agent.id, 'notes.txt'), 'first version')
    } finally {
      await page.close()
    }
  })
    .timeout(180_000)
    .skip(!haveChromium(), NO_CHROMIUM)
})
