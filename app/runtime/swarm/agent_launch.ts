import type Docker from 'dockerode'
import type { ContainerLaunch, RenderedFile } from '#plugins/types'
import { parseOwner } from '#runtime/docker/docker_record'
import { renderedSkillFiles } from '#runtime/skill_files'
import type { StateLayout } from '#runtime/swarm/state_sync'
import type { CreateRequest } from '#runtime/types'

/** What a new service of an agent is made from. */
export interface AgentLaunch {
  launch: ContainerLaunch
  /** The framework's whole command line: the image's entrypoint, then the command. */
  argv: string[]
  /** Its rendered files (config, skills), written into every new task's volume. */
  files: RenderedFile[]
  layout: StateLayout
}

/**
 * The agent's launch as a swarm task runs it: the plugin sees a container
 * (listen on 0.0.0.0, container paths), as with docker; the image is
 * resolved (pulled or built, `resolveImage`) and read on the manager for
 * its entrypoint, since the state gate runs first and then becomes it.
 */
export async function agentLaunch(
  { spec, plugin, gatewayToken }: CreateRequest,
  resolveImage: (launch: ContainerLaunch) => Promise<ContainerLaunch>,
  manager: Docker
): Promise<AgentLaunch> {
  const context = {
    agentId: spec.agentId,
    config: spec.config,
    modelProxy: spec.modelProxy,
    driver: 'docker' as const,
    port: plugin.defaultPort,
    gatewayToken,
    paths: plugin.containerPaths,
  }
  const launch = await resolveImage(plugin.containerLaunch(context))
  const image = (await manager.getImage(launch.image).inspect()) as {
    Config?: { Entrypoint?: string[] | null; Cmd?: string[] | null }
  }
  return {
    launch,
    argv: [...(image.Config?.Entrypoint ?? []), ...(launch.command ?? image.Config?.Cmd ?? [])],
    files: [...(await plugin.renderFiles(context)), ...renderedSkillFiles(plugin, spec.skills)],
    layout: {
      statePath: plugin.containerPaths.state,
      workspacePath: plugin.containerPaths.workspace,
      owner: parseOwner(launch.user),
    },
  }
}
