import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import type { AgentFileReader, FrameworkPlugin, RenderedFile } from '#plugins/types'
import { agentPaths, type AgentPaths } from '#runtime/agent_paths'
import { removeBelow, writeFileBelow, type Owner } from '#runtime/files/confined_dir'
import { LocalAgentReader, LocalWorkspaceFiles } from '#runtime/files/local_workspace'
import { resolveWorkspacePath } from '#runtime/files/workspace_path'
import { renderedSkillFiles, skillFolder } from '#runtime/skill_files'
import type { SkillChange, WorkspaceFiles } from '#runtime/types'
import { agentUid } from '#runtime/process/sandbox'

/**
 * A process agent's files on the host: its rendered config and skills,
 * its workspace's file manager and what its plugin reads (memory), all
 * confined to its own folders.
 */

let rootFolders: string[] | undefined

/**
 * `/<name>` for every entry of the host's root folder: an absolute path that
 * names a real host location (`/work/app/.env`) is refused, never mapped
 * into the workspace.
 */
export function hostRootFolders(): string[] {
  if (!rootFolders) {
    try {
      rootFolders = readdirSync('/').map((name) => `/${name}`)
    } catch {
      rootFolders = []
    }
  }
  return rootFolders
}

/**
 * The plugin's rendered files and skills, written into the agent's own
 * folders without following a link it put there (a link named SOUL.md is
 * replaced, never written through), owned by the agent's uid.
 */
export async function writeRenderedFiles(paths: AgentPaths, files: RenderedFile[], owner?: Owner) {
  for (const file of files) {
    const checked = resolveWorkspacePath(file.path)
    if (!checked.relative) throw new Error(`Rendered file with an empty path (${file.root})`)
    const target = join(file.root === 'state' ? paths.state : paths.workspace, checked.relative)
    await writeFileBelow(paths.agentsDir, target, file.content, {
      mode: file.mode ?? 0o644,
      owner,
      onlyIfMissing: file.onlyIfMissing,
    })
  }
}

/** The agent's uid and gid, when it runs under one of its own (root). */
export function agentOwner(agentId: string): Owner | undefined {
  return process.getuid?.() === 0 ? { uid: agentUid(agentId), gid: agentUid(agentId) } : undefined
}

/** The agent's workspace file manager: nothing outside it, nor any host location, is reached. */
export function agentWorkspaceFiles(
  agentsDir: string,
  cacheDir: string,
  agentId: string
): WorkspaceFiles {
  return new LocalWorkspaceFiles(agentPaths(agentsDir, agentId).workspace, {
    outsidePrefixes: [agentsDir, cacheDir, ...hostRootFolders()],
    trustedBase: agentsDir,
    owner: agentOwner(agentId),
  })
}

/** What the agent's plugin reads of its folders (its memory store). */
export function agentFileReader(agentsDir: string, agentId: string): AgentFileReader {
  const paths = agentPaths(agentsDir, agentId)
  return new LocalAgentReader({ state: paths.state, workspace: paths.workspace }, agentsDir)
}

/** Writes the skills `change` installs and removes the folders of those it uninstalls. */
export async function syncSkillFiles(
  paths: AgentPaths,
  agentId: string,
  plugin: FrameworkPlugin,
  change: SkillChange
): Promise<void> {
  await writeRenderedFiles(paths, renderedSkillFiles(plugin, change.write), agentOwner(agentId))
  const base = plugin.skillsDir?.root === 'state' ? paths.state : paths.workspace
  for (const skillId of change.remove) {
    await removeBelow(paths.agentsDir, join(base, skillFolder(plugin, skillId)))
  }
}
