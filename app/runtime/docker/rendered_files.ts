import { posix } from 'node:path'
import type Docker from 'dockerode'
import type { FrameworkPlugin, RenderedFile } from '#plugins/types'
import { statInContainer } from '#runtime/docker/docker_files'
import type { DockerRecord } from '#runtime/docker/docker_record'
import { createTar, type TarEntry } from '#runtime/files/tar'
import { resolveWorkspacePath } from '#runtime/files/workspace_path'
import { renderedSkillFiles, skillFolder } from '#runtime/skill_files'
import type { SkillChange } from '#runtime/types'

/**
 * A plugin's rendered files (config, skills) in an agent's container: put
 * into its state volume as one archive, owned by the framework's user.
 */

/** Archive entries for rendered files, relative to the state mount (parents included). */
export function renderedFilesArchive(
  files: RenderedFile[],
  paths: { state: string; workspace: string },
  owner: { uid: number; gid: number }
): Buffer {
  const workspaceInState = posix.relative(paths.state, paths.workspace)
  if (workspaceInState.startsWith('..')) {
    throw new Error('The docker driver needs the workspace inside the state volume')
  }
  const entries = new Map<string, TarEntry>()
  for (const file of files) {
    const checked = resolveWorkspacePath(file.path)
    const relative =
      file.root === 'state' ? checked.relative : posix.join(workspaceInState, checked.relative)
    const segments = relative.split('/')
    for (let index = 1; index < segments.length; index++) {
      const dir = segments.slice(0, index).join('/')
      if (!entries.has(dir))
        entries.set(dir, { name: dir, type: 'directory', mode: 0o755, ...owner })
    }
    entries.set(relative, {
      name: relative,
      type: 'file',
      content: Buffer.from(file.content, 'utf8'),
      mode: file.mode ?? 0o644,
      ...owner,
    })
  }
  return createTar([...entries.values()])
}

/** Puts `rendered` into the new container, leaving a file marked onlyIfMissing that is there. */
export async function putRenderedFiles(
  container: Docker.Container,
  rendered: RenderedFile[],
  containerPaths: { state: string; workspace: string },
  record: Pick<DockerRecord, 'statePath' | 'workspacePath' | 'owner'>
) {
  const files: RenderedFile[] = []
  for (const file of rendered) {
    if (file.onlyIfMissing) {
      const base = file.root === 'state' ? record.statePath : record.workspacePath
      if (await statInContainer(container, posix.join(base, file.path))) continue
    }
    files.push(file)
  }
  await container.putArchive(renderedFilesArchive(files, containerPaths, record.owner), {
    path: record.statePath,
  })
}

/**
 * Puts the skills `change` installs into the container and, when it runs,
 * removes those it uninstalls (a stopped one keeps the folder until then).
 */
export async function syncSkillsInContainer(
  container: Docker.Container,
  record: DockerRecord,
  running: boolean,
  plugin: FrameworkPlugin,
  change: SkillChange
): Promise<void> {
  const files = renderedSkillFiles(plugin, change.write)
  if (files.length > 0) {
    await container.putArchive(renderedFilesArchive(files, plugin.containerPaths, record.owner), {
      path: record.statePath,
    })
  }
  // Removing needs a running container (exec); a stopped one keeps the folder until then.
  if (change.remove.length === 0 || !running) return
  const base =
    plugin.skillsDir?.root === 'state'
      ? plugin.containerPaths.state
      : plugin.containerPaths.workspace
  const exec = await container.exec({
    Cmd: [
      'rm',
      '-rf',
      '--',
      ...change.remove.map((id) => posix.join(base, skillFolder(plugin, id))),
    ],
    AttachStdout: true,
    AttachStderr: true,
  })
  const stream = await exec.start({ hijack: true, stdin: false })
  stream.resume()
  await new Promise((resolve) => stream.once('end', resolve).once('close', resolve))
}
