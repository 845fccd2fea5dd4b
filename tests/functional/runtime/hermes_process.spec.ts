import { randomUUID } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from '@japa/runner'
import app from '@adonisjs/core/services/app'
import { storageDir } from '#core/bootstrap/paths'
import { agentPaths } from '#runtime/agent_paths'
import { agentUid } from '#runtime/process/sandbox'
import { isAlive } from '#runtime/process/proc_stats'
import { readRecord } from '#runtime/process/process_record'
import type { AgentRuntimeSpec } from '#runtime/types'
import { startModelUpstream, type ModelUpstream } from '#tests/helpers/model_upstream'
import { childPids, processHarness, waitFor, type RuntimeHarness } from '#tests/helpers/runtime'

/**
 * The real Hermes Agent (PyPI `hermes-agent`, HERMES_PYPI_VERSION) through
 * the process driver: the runtime cache installs it into a venv on first
 * use (about 35 s here, then cached under storage/runtime/python), its
 * gateway boots in the sandbox with the rendered HERMES_HOME, and chats go
 * through the model route the agent was given (here a local stand-in that
 * speaks the OpenAI wire format), carrying its soul, the owner's
 * instructions, an installed skill and its memory. Its terminal tool runs
 * in the agent's sandbox.
 */
test.group('Runtime / real Hermes Agent through the process driver', (group) => {
  let harness: RuntimeHarness
  let upstream: ModelUpstream
  group.setup(async () => {
    harness = await processHarness()
    upstream = await startModelUpstream({ reply: 'Kestrel here, wings ready.' })
    return async () => {
      await harness.cleanup()
      await upstream.close()
    }
  })

  test('installs on first use, boots, answers through its model route with its soul, instructions and skill, streams, runs its terminal tool confined, keeps memory across a restart, and survives a crash', async ({
    assert,
  }) => {
    const agentId = randomUUID()
    const spec: AgentRuntimeSpec = {
      agentId,
      framework: 'hermes',
      config: {
        personality: 'You are Kestrel, a patient falconer.',
        instructions: 'Always end with the word Skyward.',
      },
      modelProxy: {
        baseUrl: upstream.baseUrl,
        token: 'proxy-token-hermes-real',
        model: 'stand-in',
      },
      // A catalogue skill, written where Hermes indexes skills (HERMES_HOME/skills/<id>/SKILL.md).
      skills: [
        {
          id: 'translation',
          content: await readFile(app.makePath('skills/translation/SKILL.md'), 'utf8'),
        },
      ],
    }
    const ready = () =>
      harness.runtime.waitUntilReady(agentId, { timeoutMs: 120_000 }).catch(async (error) => {
        const log = await harness.runtime.logs(agentId).catch(() => '')
        throw new Error(`${(error as Error).message}; its log:\n${log.slice(-4000)}`)
      })
    await harness.runtime.ensureStarted(spec)
    await ready()

    const reply = await harness.runtime.chat(agentId, {
      conversationId: 'c1',
      messages: [{ role: 'user', content: 'Who are you?' }],
    })
    assert.equal(reply.content, 'Kestrel here, wings ready.')
    const modelCall = upstream.requests.find((request) => request.path === '/v1/chat/completions')
    assert.exists(modelCall, 'Hermes called the model route')
    assert.equal(modelCall!.headers.authorization, 'Bearer proxy-token-hermes-real')
    assert.equal(modelCall!.body.model, 'stand-in')
    const system = modelCall!.body.messages.find((message: any) => message.role === 'system')
    assert.include(system.content, 'You are Kestrel, a patient falconer.')
    // The owner's instructions, from AGENTS.md in its working directory.
    assert.include(system.content, 'Always end with the word Skyward.')
    // Hermes lists the installed skill in its skills index for the model.
    assert.include(system.content, '<available_skills>')
    assert.match(system.content, /- translation: Translate text between languages/)

    let streamed = ''
    for await (const piece of harness.runtime.chatStream(agentId, {
      conversationId: 'c2',
      messages: [{ role: 'user', content: 'Again, slowly.' }],
    })) {
      streamed += piece.token
    }
    assert.equal(streamed, 'Kestrel here, wings ready.')

    // Hermes' own memory tool writes the memory: the model asks for it with a tool call.
    upstream.set({
      toolCall: (body) => {
        const asked = JSON.stringify(body.messages.at(-1)).includes(
          'Remember that I fly a red kite'
        )
        return asked
          ? {
              name: 'memory',
              arguments: {
                action: 'add',
                target: 'memory',
                content: 'The owner flies a red kite.',
              },
            }
          : undefined
      },
    })
    const remembered = await harness.runtime.chat(agentId, {
      conversationId: 'c-memory',
      messages: [{ role: 'user', content: 'Remember that I fly a red kite.' }],
    })
    upstream.set({ toolCall: undefined })
    assert.equal(remembered.content, 'Kestrel here, wings ready.', 'answered after the tool ran')
    const toolResult = upstream.requests
      .filter((r) => r.path === '/v1/chat/completions')
      .at(-1)!
      .body.messages.find((m: any) => m.role === 'tool')
    assert.exists(toolResult, 'the tool result went back to the model')
    const memories = join(agentPaths(harness.agentsDir, agentId).state, 'memories')
    assert.include(
      await readFile(join(memories, 'MEMORY.md'), 'utf8'),
      'The owner flies a red kite.'
    )

    // Isolation: Hermes' terminal tool runs in the agent's sandbox, as its own user, and cannot
    // read the service's secrets (APP_KEY, readable by the service itself).
    const appKeyFile = join(storageDir(app.appRoot), 'app_key')
    const appKeyText = await readFile(appKeyFile, 'utf8')
    const appKey = appKeyText.trim()
    upstream.set({
      toolCall: (body) =>
        JSON.stringify(body.messages.at(-1)).includes('Who runs your shell?')
          ? { name: 'terminal', arguments: { command: `id -u; cat ${appKeyFile}` } }
          : undefined,
    })
    const shell = await harness.runtime.chat(agentId, {
      conversationId: 'c-terminal',
      messages: [{ role: 'user', content: 'Who runs your shell?' }],
    })
    upstream.set({ toolCall: undefined })
    assert.equal(shell.content, 'Kestrel here, wings ready.', 'answered after the tool ran')
    const terminalResult = upstream.requests
      .filter((r) => r.path === '/v1/chat/completions')
      .at(-1)!
      .body.messages.find((m: any) => m.role === 'tool')
    assert.exists(terminalResult, 'the terminal result went back to the model')
    const output = JSON.parse(terminalResult.content).output as string
    const uid = process.getuid?.() === 0 ? agentUid(agentId) : process.getuid?.()
    assert.match(output, new RegExp(`^${uid}$`, 'm'), `its own uid: ${output}`)
    assert.match(output, /No such file or directory|Permission denied/, output)
    assert.notInclude(terminalResult.content, appKey)

    // Read back through the runtime, and kept across a restart.
    await harness.runtime.restart(spec)
    await ready()
    const memory = await harness.runtime.memory(agentId)
    assert.include(memory['memories/MEMORY.md'], 'The owner flies a red kite.')
    const again = await harness.runtime.chat(agentId, {
      conversationId: 'c3',
      messages: [{ role: 'user', content: 'What do I fly?' }],
    })
    assert.equal(again.content, 'Kestrel here, wings ready.')
    const lastCall = upstream.requests.filter((r) => r.path === '/v1/chat/completions').at(-1)!
    assert.include(JSON.stringify(lastCall.body.messages), 'The owner flies a red kite.')

    // Monitoring, files and logs of the live gateway.
    const figures = await harness.runtime.monitoring(agentId)
    assert.isAbove(figures.memoryMb, 30)
    const files = await harness.runtime.files(agentId)
    await files.write('notes/today.md', 'kites')
    assert.deepInclude(await files.list('notes'), { name: 'today.md', type: 'file', size: 5 })
    // Hermes' own logging (stderr, unbuffered) in the agent's log.
    await waitFor(
      "the gateway's output in its log",
      async () => {
        const log = await harness.runtime.logs(agentId, { tail: 500 })
        return log.includes('gateway.run')
      },
      30_000
    )

    // A crash: the recorded process (the sandbox wrapper) is killed; the runtime ends what it
    // ran (the gateway, its children), starts it again and it answers.
    const paths = agentPaths(harness.agentsDir, agentId)
    const crashed = (await readRecord(paths.recordFile))!
    const gatewayPids = await childPids(crashed.pid)
    process.kill(crashed.pid, 'SIGKILL')
    await waitFor(
      'the gateway to be started again',
      async () => {
        const record = await readRecord(paths.recordFile)
        return record !== undefined && record !== null && record.pid !== crashed.pid
      },
      30_000
    )
    await ready()
    const afterCrash = await harness.runtime.chat(agentId, {
      conversationId: 'c4',
      messages: [{ role: 'user', content: 'Still there?' }],
    })
    assert.equal(afterCrash.content, 'Kestrel here, wings ready.')
    for (const pid of gatewayPids) {
      assert.isFalse(isAlive(pid), `nothing of the crashed run is left (pid ${pid})`)
    }

    const running = (await readRecord(paths.recordFile))!
    await harness.runtime.stop(agentId)
    assert.isFalse(isAlive(running.pid), 'the gateway is gone after stop')
  }).timeout(600_000)
})
