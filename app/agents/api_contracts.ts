/** What the agents routes take and answer (the source of their part of /openapi.json). */
import { t } from '#core/openapi/shapes'
import { defineContracts } from '#core/openapi/contracts'
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

export default defineContracts({
  'agents.bySlug': {
    summary: 'An agent by its slug',
    description:
      'No credential needed. The owner (with a JWT) gets the full agent (secrets masked); anyone else id, name, slug, description, avatarUrl, framework, status.',
    responses: {
      200: t.object({
        id: t.string(),
        name: t.string(),
        slug: t.string(),
        description: t.nullable(t.string()),
        avatarUrl: t.unknown(),
        framework: t.string(),
        status: t.string(),
      }),
    },
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
          'text/event-stream': { type: 'string' },
        },
      },
    },
  },
  'agents.store': {
    summary: 'Create an agent',
    description:
      "name 2-50 characters; framework an installed framework plugin (openclaw, hermes); config is checked by the framework. Beyond the plan's agent limit: 400. The container starts in the background.",
    body: createAgentValidator,
    responses: {
      201: t.object({
        id: t.string(),
        name: t.string(),
        slug: t.string(),
        status: t.string(),
        framework: t.string(),
        messageCount: t.integer(),
        createdAt: t.dateTime(),
        description: t.nullable(t.string()),
        avatarUrl: t.unknown(),
        config: t.object({
          personality: t.string(),
          provider: t.string(),
          apiKey: t.string(),
        }),
        integrations: t.array(t.unknown()),
        lastActiveAt: t.unknown(),
        updatedAt: t.dateTime(),
      }),
    },
  },
  'agents.index': {
    summary: 'My agents',
    description: 'Newest first. page from 1; limit 1-100 (default 20).',
    query: listAgentsValidator,
    parameters: { page: 'Page number, from 1', limit: 'Items per page, 1 to 100 (default 20)' },
    responses: {
      200: t.object({
        agents: t.array(
          t.object({
            id: t.string(),
            name: t.string(),
            slug: t.string(),
            status: t.string(),
            framework: t.string(),
            messageCount: t.integer(),
            createdAt: t.dateTime(),
          })
        ),
        total: t.integer(),
        page: t.integer(),
        limit: t.integer(),
      }),
    },
  },
  'agents.show': {
    summary: 'One agent',
    description: 'Owner only (403 otherwise). Secret config values are answered as ***.',
    responses: {
      200: t.object({
        id: t.string(),
        name: t.string(),
        slug: t.string(),
        status: t.string(),
        framework: t.string(),
        messageCount: t.integer(),
        createdAt: t.dateTime(),
        description: t.nullable(t.string()),
        avatarUrl: t.unknown(),
        config: t.object({
          personality: t.string(),
          apiKey: t.string(),
        }),
        integrations: t.array(t.unknown()),
        lastActiveAt: t.nullable(t.dateTime()),
        updatedAt: t.dateTime(),
      }),
    },
  },
  'agents.update': {
    summary: 'Change an agent',
    description:
      'config is deep-merged into the stored config: send only changed keys; *** for a secret keeps the stored value; null removes a key. A config change stores a new version (commitMessage or a generated message) and restarts a running container with it.',
    body: updateAgentValidator,
    responses: {
      200: t.object({
        id: t.string(),
        name: t.string(),
        slug: t.string(),
        status: t.string(),
        framework: t.string(),
        messageCount: t.integer(),
        createdAt: t.dateTime(),
        description: t.nullable(t.string()),
        avatarUrl: t.unknown(),
        config: t.object({
          personality: t.string(),
          apiKey: t.string(),
        }),
        integrations: t.array(t.unknown()),
        lastActiveAt: t.unknown(),
        updatedAt: t.dateTime(),
      }),
    },
  },
  'agents.destroy': {
    summary: 'Delete an agent',
    description: 'Stops and removes its container and every file it had. Irreversible.',
    responses: {
      200: t.object({
        deleted: t.boolean(),
      }),
    },
  },
  'agents.start': {
    summary: "Start the agent's container",
    description:
      'Answers at once with the containerId of the run it scheduled (the running one when it runs already); the container boots, waits in the boot queue or wakes afterwards. A paused agent (plan limit) answers 400.',
    responses: {
      200: t.object({
        status: t.string(),
        containerId: t.string(),
      }),
    },
  },
  'agents.stop': {
    summary: "Stop the agent's container",
    description:
      'Answers at once: the stored status is stopped, a boot waiting or under way is cancelled and the container stops in the background. Keeps config and data; it can be started again.',
    responses: {
      200: t.object({
        status: t.string(),
      }),
    },
  },
  'agents.restart': {
    summary: "Restart the agent's container",
    description:
      "Answers at once with the new run's containerId; the container stops and boots with the current config in the background (a booting agent boots once more, not twice).",
    responses: {
      200: t.object({
        status: t.string(),
        containerId: t.string(),
      }),
    },
  },
  'agents.status': {
    summary: 'Agent status (lighter than the detail)',
    description:
      "status is one of active, stopped, paused, error (what the owner wants); containerId is the run's id from the moment it is scheduled (also while queued), null when no run is; container is where its container stands: running, starting, queued (waiting for a boot slot or memory), sleeping (idle: stopped until the next message wakes it), stopped, error. queuePosition is its 1-based place in the boot queue while container is queued (interactive starts first, accounts taking turns), else null. phase says which step of a start it is at (queued, preparing, installing, warming, booting, restoring), else the container state; phaseSince is when it got there (null when this instance did not see it).",
    responses: {
      200: t.object({
        status: t.string(),
        containerId: t.nullable(t.string()),
        messageCount: t.integer(),
        container: t.string(),
        queuePosition: t.unknown(),
        phase: t.string(),
        phaseSince: t.nullable(t.dateTime()),
      }),
    },
  },
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
        container: t.string(),
        queuePosition: t.unknown(),
        phase: t.string(),
        phaseSince: t.nullable(t.dateTime()),
      }),
    },
  },
  'agents.monitoring': {
    summary: "CPU, memory and restarts of the agent's container",
    description:
      'A sleeping, queued or starting agent holds no memory: zeros, with status and container saying why. 409 AGENT_NOT_RUNNING when the agent is stopped, paused or failed.',
    responses: {
      200: t.object({
        cpuPercent: t.number(),
        memoryMb: t.number(),
        memoryLimitMb: t.integer(),
        restartCount: t.integer(),
        status: t.string(),
        container: t.string(),
      }),
    },
  },
  'agents.memory': {
    summary: "The agent's memory store",
    description: "Read from the framework's memory files in the container; 409 when not running.",
    responses: {
      200: t.object({
        memory: t.object({
          'MEMORY.md': t.string(),
        }),
      }),
    },
  },
  'agents.feed': {
    summary: 'Activity feed',
    description: 'The newest 50 events, newest first: status_change, error, message.',
    responses: {
      200: t.object({
        events: t.array(
          t.object({
            id: t.string(),
            type: t.string(),
            content: t.string(),
            ts: t.dateTime(),
          })
        ),
      }),
    },
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
  },
  'agents.files.index': {
    summary: 'List a workspace folder',
    description:
      'Folders first, then by name. At most 1,000 entries: a larger folder answers its first 1,000 with the headers `X-Truncated: true` and `X-Total-Count` (its number of entries).',
    query: listFilesValidator,
    parameters: { path: 'Folder inside the workspace (default /)' },
    responses: {
      200: t.object({
        files: t.array(
          t.object({
            name: t.string(),
            type: t.string(),
            size: t.integer(),
          })
        ),
      }),
    },
  },
  'agents.files.read': {
    summary: 'Read a workspace file',
    query: filePathValidator,
    parameters: { path: 'File inside the workspace' },
    responses: {
      200: t.object({
        content: t.string(),
        size: t.integer(),
      }),
    },
  },
  'agents.files.write': {
    summary: 'Write a workspace file',
    description:
      'PUT /agents/:id/container-files, or POST/PUT /agents/:id/container-files/write. Parent folders are created. At most 1,000,000 characters.',
    body: writeFileValidator,
    responses: {
      200: t.object({
        path: t.string(),
        size: t.integer(),
      }),
    },
  },
  'agents.files.writePut': {
    summary: 'Write a workspace file',
    description:
      'PUT /agents/:id/container-files, or POST/PUT /agents/:id/container-files/write. Parent folders are created. At most 1,000,000 characters.',
    body: writeFileValidator,
    responses: {
      200: t.object({
        path: t.string(),
        size: t.integer(),
      }),
    },
  },
  'agents.files.writePost': {
    summary: 'Write a workspace file',
    description:
      'PUT /agents/:id/container-files, or POST/PUT /agents/:id/container-files/write. Parent folders are created. At most 1,000,000 characters.',
    body: writeFileValidator,
    responses: {
      200: t.object({
        path: t.string(),
        size: t.integer(),
      }),
    },
  },
  'agents.files.destroy': {
    summary: 'Delete a workspace file or folder',
    description:
      'DELETE /agents/:id/container-files?path=... or DELETE /agents/:id/container-files/delete?path=...',
    query: filePathValidator,
    parameters: { path: 'File or folder inside the workspace' },
    responses: {
      200: t.object({
        deleted: t.string(),
      }),
    },
  },
  'agents.files.delete': {
    summary: 'Delete a workspace file or folder',
    description:
      'DELETE /agents/:id/container-files?path=... or DELETE /agents/:id/container-files/delete?path=...',
    query: filePathValidator,
    parameters: { path: 'File or folder inside the workspace' },
    responses: {
      200: t.object({
        deleted: t.string(),
      }),
    },
  },
  'agents.versions.index': {
    summary: 'Config versions',
    description: 'Newest first. Every config change (creation, PATCH, restore) is a version.',
    query: listVersionsValidator,
    parameters: { limit: '1 to 100 (default 20)', offset: 'Versions to skip (default 0)' },
    responses: {
      200: t.array(
        t.object({
          version: t.integer(),
          message: t.string(),
          createdAt: t.dateTime(),
        })
      ),
    },
  },
  'agents.versions.show': {
    summary: 'One config version',
    description: 'The full config of that version, secrets masked.',
    responses: {
      200: t.object({
        id: t.string(),
        version: t.integer(),
        message: t.string(),
        createdAt: t.dateTime(),
        config: t.object({
          personality: t.string(),
          apiKey: t.string(),
        }),
      }),
    },
  },
  'agents.versions.restore': {
    summary: 'Restore a config version',
    description:
      "The config becomes that version's; the restore is stored as a new version and a running container is restarted with it. Answers the updated agent, its new version and the version restored from.",
    responses: {
      200: t.object({
        id: t.string(),
        name: t.string(),
        slug: t.string(),
        status: t.string(),
        framework: t.string(),
        messageCount: t.integer(),
        createdAt: t.dateTime(),
        description: t.unknown(),
        avatarUrl: t.unknown(),
        config: t.object({
          personality: t.string(),
          apiKey: t.string(),
        }),
        integrations: t.array(t.unknown()),
        lastActiveAt: t.unknown(),
        updatedAt: t.dateTime(),
        version: t.integer(),
        restoredFrom: t.integer(),
      }),
    },
  },
  'agents.snapshots.index': {
    summary: 'Config snapshots',
    description:
      'The newest 100 versions with their snapshot ids, newest first (data is the array).',
    responses: {
      200: t.array(
        t.object({
          id: t.string(),
          version: t.integer(),
          message: t.string(),
          createdAt: t.dateTime(),
        })
      ),
    },
  },
  'agents.snapshots.restore': {
    summary: 'Restore a config snapshot',
    description: 'Like restoring its version: stored as a new version; answers the updated agent.',
    responses: {
      200: t.object({
        id: t.string(),
        name: t.string(),
        slug: t.string(),
        status: t.string(),
        framework: t.string(),
        messageCount: t.integer(),
        createdAt: t.dateTime(),
        description: t.unknown(),
        avatarUrl: t.unknown(),
        config: t.object({
          personality: t.string(),
          apiKey: t.string(),
        }),
        integrations: t.array(t.unknown()),
        lastActiveAt: t.unknown(),
        updatedAt: t.dateTime(),
        version: t.integer(),
        restoredFrom: t.integer(),
      }),
    },
  },
  'api.v1.agents.index': {
    summary: 'My agents',
    description: 'Newest first. page from 1; limit 1-100 (default 20).',
    query: listAgentsValidator,
    parameters: { page: 'Page number, from 1', limit: 'Items per page, 1 to 100 (default 20)' },
    responses: {
      200: t.object({
        agents: t.array(
          t.object({
            id: t.string(),
            name: t.string(),
            slug: t.string(),
            status: t.string(),
            framework: t.string(),
            messageCount: t.integer(),
            createdAt: t.dateTime(),
          })
        ),
        total: t.integer(),
        page: t.integer(),
        limit: t.integer(),
      }),
    },
  },
  'api.v1.agents.show': {
    summary: 'One agent',
    description: 'Owner only (403 otherwise). Secret config values are answered as ***.',
    responses: {
      200: t.object({
        id: t.string(),
        name: t.string(),
        slug: t.string(),
        status: t.string(),
        framework: t.string(),
        messageCount: t.integer(),
        createdAt: t.dateTime(),
        description: t.nullable(t.string()),
        avatarUrl: t.unknown(),
        config: t.object({
          personality: t.string(),
          apiKey: t.string(),
        }),
        integrations: t.array(t.unknown()),
        lastActiveAt: t.nullable(t.dateTime()),
        updatedAt: t.dateTime(),
      }),
    },
  },
  'api.v1.agents.status': {
    summary: 'Agent status (lighter than the detail)',
    description:
      "status is one of active, stopped, paused, error (what the owner wants); containerId is the run's id from the moment it is scheduled (also while queued), null when no run is; container is where its container stands: running, starting, queued (waiting for a boot slot or memory), sleeping (idle: stopped until the next message wakes it), stopped, error. queuePosition is its 1-based place in the boot queue while container is queued (interactive starts first, accounts taking turns), else null. phase says which step of a start it is at (queued, preparing, installing, warming, booting, restoring), else the container state; phaseSince is when it got there (null when this instance did not see it).",
    responses: {
      200: t.object({
        status: t.string(),
        containerId: t.nullable(t.string()),
        messageCount: t.integer(),
        container: t.string(),
        queuePosition: t.unknown(),
        phase: t.string(),
        phaseSince: t.nullable(t.dateTime()),
      }),
    },
  },
  'api.v1.agents.start': {
    summary: "Start the agent's container",
    description:
      'Answers at once with the containerId of the run it scheduled (the running one when it runs already); the container boots, waits in the boot queue or wakes afterwards. A paused agent (plan limit) answers 400.',
    responses: {
      200: t.object({
        status: t.string(),
        containerId: t.string(),
      }),
    },
  },
  'api.v1.agents.stop': {
    summary: "Stop the agent's container",
    description:
      'Answers at once: the stored status is stopped, a boot waiting or under way is cancelled and the container stops in the background. Keeps config and data; it can be started again.',
    responses: {
      200: t.object({
        status: t.string(),
      }),
    },
  },
  'api.v1.agents.restart': {
    summary: "Restart the agent's container",
    description:
      "Answers at once with the new run's containerId; the container stops and boots with the current config in the background (a booting agent boots once more, not twice).",
    responses: {
      200: t.object({
        status: t.string(),
        containerId: t.string(),
      }),
    },
  },
})
