/** What the agents routes take and answer (the source of their part of /openapi.json). */
import app from '@adonisjs/core/services/app'
import { sseEventSchema, t } from '#core/openapi/shapes'
import { defineContracts, type RouteContract } from '#core/openapi/contracts'
import {
  AgentNotRunningException,
  ForbiddenException,
  RateLimitExceededException,
} from '#core/exceptions/api_exceptions'
import {
  createAgentValidator,
  filePathValidator,
  listAgentsValidator,
  listFilesValidator,
  listVersionsValidator,
  logsValidator,
  updateAgentValidator,
  writeFileValidator,
} from '#agents/validators/agent_validators'
import {
  agentDetailShape,
  agentListItemShape,
  agentPublicViewShape,
  restoredAgentShape,
} from '#agents/services/agent_presenter'

/** Where the container stands (CONTRACT.md `container`). */
const container = t.string({
  description: 'running, starting, queued, sleeping, stopped or error',
})
const bootFields = {
  container,
  queuePosition: t.nullable(t.integer({ minimum: 1 })),
  phase: t.string(),
  phaseSince: t.nullable(t.dateTime()),
}

const agentStatus = t.named(
  'AgentStatus',
  t.object({
    status: t.string(),
    containerId: t.nullable(t.string()),
    messageCount: t.integer(),
    ...bootFields,
  })
)

const versionEntry = { version: t.integer(), message: t.string(), createdAt: t.dateTime() }
const snapshotEntry = t.named('ConfigSnapshot', t.object({ id: t.uuid(), ...versionEntry }))

/** The framework plugin checks the config (its own keys; `channels` for the channel plugins). */
const agentConfig = {
  description:
    'Checked by the framework plugin (personality, instructions, provider, model, apiKey; channels for the channel plugins); other keys are kept.',
}

/** The installed framework plugins are the only accepted `framework` values. */
async function installedFrameworks(): Promise<string[]> {
  const registry = await app.container.make('plugins')
  return registry.frameworks().map((framework) => framework.name)
}

const startAnswer = t.object({ status: t.string(), containerId: t.string() })

const list: RouteContract = {
  summary: 'My agents',
  description: 'Newest first. page from 1; limit 1-100 (default 20).',
  query: listAgentsValidator,
  parameters: { page: 'Page number, from 1', limit: 'Items per page, 1 to 100 (default 20)' },
  responses: {
    200: t.object({
      agents: t.array(agentListItemShape),
      total: t.integer(),
      page: t.integer(),
      limit: t.integer(),
    }),
  },
}

const show: RouteContract = {
  summary: 'One agent',
  description: 'Owner only (403 otherwise). Secret config values are answered as ***.',
  responses: { 200: agentDetailShape },
  errors: [ForbiddenException],
}

const status: RouteContract = {
  summary: 'Agent status (lighter than the detail)',
  description:
    "status is one of active, stopped, paused, error (what the owner wants); containerId is the run's id from the moment it is scheduled (also while queued), null when no run is; container is where its container stands: running, starting, queued (waiting for a boot slot or memory), sleeping (idle: stopped until the next message wakes it), stopped, error. queuePosition is its 1-based place in the boot queue while container is queued (interactive starts first, accounts taking turns), else null. phase says which step of a start it is at (queued, preparing, installing, warming, booting, restoring), else the container state; phaseSince is when it got there (null when this instance did not see it).",
  responses: { 200: agentStatus },
  errors: [ForbiddenException],
}

const start: RouteContract = {
  summary: "Start the agent's container",
  description:
    'Answers at once with the containerId of the run it scheduled (the running one when it runs already); the container boots, waits in the boot queue or wakes afterwards. A paused agent (plan limit) answers 400.',
  responses: { 200: startAnswer },
  errors: [ForbiddenException],
}

const stop: RouteContract = {
  summary: "Stop the agent's container",
  description:
    'Answers at once: the stored status is stopped, a boot waiting or under way is cancelled and the container stops in the background. Keeps config and data; it can be started again.',
  responses: { 200: t.object({ status: t.string() }) },
  errors: [ForbiddenException],
}

const restart: RouteContract = {
  summary: "Restart the agent's container",
  description:
    "Answers at once with the new run's containerId; the container stops and boots with the current config in the background (a booting agent boots once more, not twice).",
  responses: { 200: startAnswer },
  errors: [ForbiddenException],
}

const writeFile: RouteContract = {
  summary: 'Write a workspace file',
  description:
    'PUT /agents/:id/container-files, or POST/PUT /agents/:id/container-files/write. Parent folders are created. At most 1,000,000 characters. A path naming no file (empty, only separators or dots) is 400; one outside the workspace 403.',
  body: writeFileValidator,
  responses: { 200: t.object({ path: t.string(), size: t.integer() }) },
  errors: [ForbiddenException, AgentNotRunningException],
}

const deleteFile: RouteContract = {
  summary: 'Delete a workspace file or folder',
  description:
    'DELETE /agents/:id/container-files?path=... or DELETE /agents/:id/container-files/delete?path=...',
  query: filePathValidator,
  parameters: { path: 'File or folder inside the workspace' },
  responses: { 200: t.object({ deleted: t.string() }) },
  errors: [ForbiddenException, AgentNotRunningException],
}

/** The programmatic API counts each call against the plan's daily limit. */
const quota = [RateLimitExceededException]

function programmatic(contract: RouteContract): RouteContract {
  return { ...contract, errors: [...(contract.errors ?? []), ...quota] }
}

export default defineContracts({
  'agents.bySlug': {
    summary: 'An agent by its slug',
    description:
      'No credential needed. The owner (with a JWT) gets the full agent (secrets masked); anyone else id, name, slug, description, avatarUrl, framework, status.',
    responses: { 200: t.anyOf(agentDetailShape, agentPublicViewShape) },
  },
  'agents.logs': {
    summary: 'Container logs',
    description:
      'Plain text, the last `tail` lines (default 100, at most 1000), secrets shown as ***. With stream=true: a live text/event-stream, one `data:` event per log line, starting with the last `tail` lines (409 when the container is not running). Authenticate with the JWT, or with `token` from POST /agents/:id/logs/token.',
    query: logsValidator,
    parameters: {
      tail: 'Number of lines (default 100)',
      stream: 'true for a live SSE stream',
      token: 'Short-lived logs token (instead of the Authorization header)',
    },
    responses: {
      200: {
        description:
          'The last `tail` lines as plain text; with stream=true a live event stream, one `data:` event per line',
        content: {
          'text/plain': { type: 'string' },
          'text/event-stream': sseEventSchema('One log line'),
        },
      },
    },
    errors: [ForbiddenException, AgentNotRunningException, RateLimitExceededException],
  },
  'agents.store': {
    summary: 'Create an agent',
    description:
      "name 2-50 characters; framework an installed framework plugin (openclaw, hermes); config is checked by the framework. Beyond the plan's agent limit: 400. The container starts in the background.",
    body: createAgentValidator,
    bodyRules: async () => ({
      properties: {
        framework: { enum: await installedFrameworks() },
        config: agentConfig,
      },
    }),
    responses: { 201: agentDetailShape },
  },
  'agents.index': list,
  'agents.show': show,
  'agents.update': {
    summary: 'Change an agent',
    description:
      'config is deep-merged into the stored config: send only changed keys; *** for a secret keeps the stored value; null removes a key. A config change stores a new version (commitMessage or a generated message) and restarts a running container with it.',
    body: updateAgentValidator,
    bodyRules: { properties: { config: agentConfig } },
    responses: { 200: agentDetailShape },
    errors: [ForbiddenException],
  },
  'agents.destroy': {
    summary: 'Delete an agent',
    description: 'Stops and removes its container and every file it had. Irreversible.',
    responses: { 200: t.object({ deleted: t.literal(true) }) },
    errors: [ForbiddenException],
  },
  'agents.start': start,
  'agents.stop': stop,
  'agents.restart': restart,
  'agents.status': status,
  'agents.stats': {
    summary: 'Agent stats',
    description:
      'uptimeSecs is 0 while the container is not running; container, phase and phaseSince as in status.',
    responses: {
      200: t.object({
        messagesProcessed: t.integer(),
        uptimeSecs: t.integer(),
        lastActiveAt: t.nullable(t.dateTime()),
        containerId: t.nullable(t.string()),
        status: t.string(),
        ...bootFields,
      }),
    },
    errors: [ForbiddenException],
  },
  'agents.monitoring': {
    summary: "CPU, memory and restarts of the agent's container",
    description:
      'A sleeping, queued or starting agent holds no memory: zeros, with status and container saying why. 409 AGENT_NOT_RUNNING when the agent is stopped, paused or failed.',
    responses: {
      200: t.object({
        cpuPercent: t.number(),
        memoryMb: t.number(),
        memoryLimitMb: t.number(),
        restartCount: t.integer(),
        status: t.string(),
        container,
      }),
    },
    errors: [ForbiddenException, AgentNotRunningException],
  },
  'agents.memory': {
    summary: "The agent's memory store",
    description: "Read from the framework's memory files in the container; 409 when not running.",
    responses: {
      200: t.object({
        memory: t.record(t.string()),
      }),
    },
    errors: [ForbiddenException, AgentNotRunningException],
  },
  'agents.feed': {
    summary: 'Activity feed',
    description: 'The newest 50 events, newest first: status_change, error, message.',
    responses: {
      200: t.object({
        events: t.array(
          t.object({ id: t.uuid(), type: t.string(), content: t.string(), ts: t.dateTime() })
        ),
      }),
    },
    errors: [ForbiddenException],
  },
  'agents.logs.token': {
    summary: 'A short-lived token for the live log stream',
    description:
      "For EventSource clients, which cannot send an Authorization header: open GET /agents/:id/logs?stream=true&token=<token> within 5 minutes. The token is valid for this agent's logs only.",
    responses: {
      200: t.object({
        token: t.string(),
        expiresIn: t.integer(),
        expiresAt: t.dateTime(),
        streamUrl: t.string(),
      }),
    },
    errors: [ForbiddenException],
  },
  'agents.files.index': {
    summary: 'List a workspace folder',
    description:
      'Folders first, then by name. At most 1,000 entries: a larger folder answers its first 1,000 with the headers `X-Truncated: true` and `X-Total-Count` (its number of entries).',
    query: listFilesValidator,
    parameters: { path: 'Folder inside the workspace (default /)' },
    responses: {
      200: t.object({
        files: t.array(t.object({ name: t.string(), type: t.string(), size: t.integer() })),
      }),
    },
    errors: [ForbiddenException, AgentNotRunningException],
  },
  'agents.files.read': {
    summary: 'Read a workspace file',
    query: filePathValidator,
    parameters: { path: 'File inside the workspace' },
    responses: { 200: t.object({ content: t.string(), size: t.integer() }) },
    errors: [ForbiddenException, AgentNotRunningException],
  },
  'agents.files.write': writeFile,
  'agents.files.writePut': writeFile,
  'agents.files.writePost': writeFile,
  'agents.files.destroy': deleteFile,
  'agents.files.delete': deleteFile,
  'agents.versions.index': {
    summary: 'Config versions',
    description: 'Newest first. Every config change (creation, PATCH, restore) is a version.',
    query: listVersionsValidator,
    parameters: { limit: '1 to 100 (default 20)', offset: 'Versions to skip (default 0)' },
    responses: { 200: t.array(t.object(versionEntry)) },
    errors: [ForbiddenException],
  },
  'agents.versions.show': {
    summary: 'One config version',
    description: 'The full config of that version, secrets masked.',
    responses: {
      200: t.object({ id: t.uuid(), ...versionEntry, config: t.anyObject() }),
    },
    errors: [ForbiddenException],
  },
  'agents.versions.restore': {
    summary: 'Restore a config version',
    description:
      "The config becomes that version's; the restore is stored as a new version and a running container is restarted with it. Answers the updated agent, its new version and the version restored from.",
    responses: { 200: restoredAgentShape },
    errors: [ForbiddenException],
  },
  'agents.snapshots.index': {
    summary: 'Config snapshots',
    description:
      'The newest 100 versions with their snapshot ids, newest first (data is the array).',
    responses: { 200: t.array(snapshotEntry) },
    errors: [ForbiddenException],
  },
  'agents.snapshots.restore': {
    summary: 'Restore a config snapshot',
    description: 'Like restoring its version: stored as a new version; answers the updated agent.',
    responses: { 200: restoredAgentShape },
    errors: [ForbiddenException],
  },
  'api.v1.agents.index': programmatic(list),
  'api.v1.agents.show': programmatic(show),
  'api.v1.agents.status': programmatic(status),
  'api.v1.agents.start': programmatic(start),
  'api.v1.agents.stop': programmatic(stop),
  'api.v1.agents.restart': programmatic(restart),
})
