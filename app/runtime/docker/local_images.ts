import { execFile, spawn } from 'node:child_process'
import {
  chmod,
  copyFile,
  cp,
  mkdir,
  mkdtemp,
  readdir,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises'
import { existsSync, realpathSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { promisify } from 'node:util'
import type Docker from 'dockerode'
import type { LocalImageRecipe } from '#plugins/types'

const run = promisify(execFile)

/** Where Node.js sits in a locally built image (recipes' commands name it). */
export const IMAGE_NODE = '/usr/local/bin/node'
/** The uid:gid agents run as in locally built images. */
export const IMAGE_USER = '1000:1000'

/**
 * The host's statically linked BusyBox (Debian's `busybox-static`): one
 * binary with no libraries, linked under its applets' names (`/bin/sh`,
 * `ls`, `grep`, ...) so a framework's shell tool works in the image.
 */
const HOST_BUSYBOX = ['/bin/busybox', '/usr/bin/busybox'].find((path) => existsSync(path))

/**
 * The version of what stageRootfs puts in every image, and whether a shell
 * is in it: part of each locally built image's tag, so a changed recipe or
 * a host that gained BusyBox never reuses an older image.
 */
const BASE_LAYOUT = 2

/** The tag a recipe's image is built and run under (see BASE_LAYOUT). */
export function localImageTag(recipe: LocalImageRecipe): string {
  const [repo, tag] = splitTag(recipe.tag)
  return `${repo}:${tag}-base${BASE_LAYOUT}${HOST_BUSYBOX ? '-sh' : ''}`
}

/** Applets an agent has no use for (they need privileges it never has, or serve a console). */
const UNLINKED_APPLETS = new Set(['busybox', 'linuxrc', 'init', 'login', 'sulogin', 'passwd'])

/**
 * BusyBox at /bin/busybox and its applets linked in /bin, where no file of
 * the image has the name already. Returns false when the host has none
 * (the image then has no shell at all).
 */
async function stageBusybox(root: string): Promise<boolean> {
  if (!HOST_BUSYBOX) return false
  const target = join(root, 'bin', 'busybox')
  await mkdir(dirname(target), { recursive: true })
  await copyFile(realpathSync(HOST_BUSYBOX), target)
  await chmod(target, 0o755)
  const { stdout } = await run(target, ['--list'])
  for (const applet of stdout.split('\n').map((name) => name.trim())) {
    if (!/^[\w.[-]+$/.test(applet) || UNLINKED_APPLETS.has(applet)) continue
    const link = join(root, 'bin', applet)
    if (!existsSync(link)) await symlink('busybox', link)
  }
  return true
}

/** An npm package of a recipe, already installed on this host. */
export interface StagedPackage {
  name: string
  /** The install's root on this host (holding node_modules/<name>). */
  hostRoot: string
}

/** Shared libraries a binary loads, as `ldd` names them (the loader included). */
export async function sharedLibraries(binary: string): Promise<string[]> {
  const { stdout } = await run('ldd', [binary])
  const paths = new Set<string>()
  for (const line of stdout.split('\n')) {
    const match = line.match(/(?:=>\s*)?(\/\S+)\s+\(0x/)
    if (match) paths.add(match[1])
  }
  return [...paths]
}

/**
 * The root file system of a minimal image: this host's Node.js binary and
 * the libraries it loads, CA certificates, an unprivileged `agent` user
 * (1000) and its /data home, the recipe's npm packages at /opt/<name>, and
 * BusyBox as /bin/sh and the basic tools when the host has it (a
 * framework's shell tool needs one). No package manager, nothing setuid.
 */
async function stageRootfs(
  root: string,
  nodeExecutable: string,
  packages: StagedPackage[],
  writableDirs: string[],
  log: (message: string) => void
) {
  if (!(await stageBusybox(root))) {
    log('no BusyBox on this host (apt-get install busybox-static): the image has no shell')
  }
  const node = realpathSync(nodeExecutable)
  await mkdir(join(root, 'usr/local/bin'), { recursive: true })
  await copyFile(node, join(root, IMAGE_NODE))
  await chmod(join(root, IMAGE_NODE), 0o755)
  for (const library of await sharedLibraries(node)) {
    await mkdir(join(root, dirname(library)), { recursive: true })
    // The file a symlink names, under the name the loader asks for.
    await copyFile(realpathSync(library), join(root, library))
  }
  await mkdir(join(root, 'etc/ssl/certs'), { recursive: true })
  for (const bundle of ['/etc/ssl/certs/ca-certificates.crt']) {
    if (existsSync(bundle)) await copyFile(bundle, join(root, bundle))
  }
  await writeFile(
    join(root, 'etc/passwd'),
    'root:x:0:0:root:/root:/sbin/nologin\nagent:x:1000:1000:agent:/data:/sbin/nologin\n'
  )
  await writeFile(join(root, 'etc/group'), 'root:x:0:\nagent:x:1000:\n')
  await writeFile(
    join(root, 'etc/nsswitch.conf'),
    'passwd: files\ngroup: files\nhosts: files dns\n'
  )
  const home = homeOf(writableDirs).slice(1)
  const folders = ['tmp', 'data', ...writableDirs.map((dir) => dir.replace(/^\/+/, ''))]
  // Programs keep caches under $HOME/.cache and may not create the parent themselves.
  for (const folder of [...folders, `${home}/.cache`]) {
    await mkdir(join(root, folder), { recursive: true })
    // The archive holds root-owned files only; a new state volume on /data copies this mode,
    // so the agent's user can write there (each agent has its own volume).
    await chmod(join(root, folder), 0o1777)
  }
  for (const pkg of packages) {
    await cp(pkg.hostRoot, join(root, 'opt', pkg.name), { recursive: true, verbatimSymlinks: true })
  }
}

/** Where the Python interpreter sits in a locally built image (venvs made on the host name it). */
export const IMAGE_PYTHON = '/usr/bin/python3'

/** A venv of the runtime cache, to be copied into an image. */
export interface StagedPythonEnvironment {
  name: string
  venvDir: string
}

/** Copies a binary's shared libraries (as ldd finds them on this host) into the image root. */
async function stageLibrariesOf(root: string, binary: string) {
  for (const library of await sharedLibraries(binary).catch(() => [])) {
    if (existsSync(join(root, library))) continue
    await mkdir(join(root, dirname(library)), { recursive: true })
    await copyFile(realpathSync(library), join(root, library))
  }
}

async function sharedObjectsUnder(folder: string): Promise<string[]> {
  const found: string[] = []
  for (const entry of await readdir(folder, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && /\.so(\.|$)/.test(entry.name))
      found.push(join(entry.parentPath, entry.name))
  }
  return found
}

/** Parts of the standard library an agent never needs (tests, GUI, installers). */
const UNNEEDED_STDLIB = /\/(test|idlelib|tkinter|turtledemo|ensurepip|lib2to3)(\/|$)/

/**
 * The host's python3 (the one the venv was made with), its standard
 * library, the venv at /opt/<name>, and the libraries the interpreter and
 * every extension module load. The venv's scripts name its host path, so
 * recipes run `/opt/<name>/bin/python -m <module>` instead.
 */
async function stagePython(root: string, environment: StagedPythonEnvironment) {
  const interpreter = realpathSync(IMAGE_PYTHON)
  const version = basename(interpreter)
  await mkdir(join(root, dirname(interpreter)), { recursive: true })
  await copyFile(interpreter, join(root, interpreter))
  await chmod(join(root, interpreter), 0o755)
  if (interpreter !== IMAGE_PYTHON) await symlink(version, join(root, IMAGE_PYTHON))
  const stdlib = join(dirname(dirname(interpreter)), 'lib', version)
  await cp(stdlib, join(root, stdlib), {
    recursive: true,
    verbatimSymlinks: true,
    filter: (source) => !UNNEEDED_STDLIB.test(source.slice(stdlib.length)),
  })
  const target = join(root, 'opt', environment.name)
  await cp(environment.venvDir, target, { recursive: true, verbatimSymlinks: true })
  await stageLibrariesOf(root, interpreter)
  for (const module of [
    ...(await sharedObjectsUnder(join(root, stdlib, 'lib-dynload'))),
    ...(await sharedObjectsUnder(target)),
  ]) {
    await stageLibrariesOf(root, module)
  }
}

/** The agent user's home: the first folder the recipe keeps writable (its state volume), else /data. */
function homeOf(writableDirs: string[]): string {
  return writableDirs[0] ?? '/data'
}

/** Streams `root` as a tar archive with numeric owners (agent files 1000, the rest root). */
function tarOf(root: string) {
  const child = spawn('tar', ['-C', root, '--numeric-owner', '--owner=0', '--group=0', '-c', '.'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  child.stderr.on('data', (chunk) => (stderr += chunk))
  const done = new Promise<void>((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`tar exited ${code}: ${stderr.trim()}`))
    )
  })
  return { stream: child.stdout, done }
}

/**
 * Builds the recipe's image (tagged localImageTag(recipe)) on this host with `docker import`-style
 * `POST /images/create?fromSrc=-` (no registry, no Dockerfile, no build
 * kit): used when the framework's official image cannot be pulled.
 */
export async function buildLocalImage(
  docker: Docker,
  recipe: LocalImageRecipe,
  options: {
    nodeExecutable?: string
    packages?: StagedPackage[]
    python?: StagedPythonEnvironment
    log?: (message: string) => void
  } = {}
): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), 'agent-host-image-'))
  try {
    await stageRootfs(
      root,
      options.nodeExecutable ?? process.execPath,
      options.packages ?? [],
      recipe.writableDirs ?? [],
      options.log ?? (() => {})
    )
    if (options.python) await stagePython(root, options.python)
    const [repo, tag] = splitTag(localImageTag(recipe))
    const tar = tarOf(root)
    const response = (await docker.importImage(
      tar.stream as never,
      {
        repo,
        tag,
        changes: [
          'ENV PATH=/usr/local/bin:/usr/bin:/bin',
          ...(HOST_BUSYBOX ? ['ENV SHELL=/bin/sh'] : []),
          `ENV HOME=${homeOf(recipe.writableDirs ?? [])}`,
          `USER ${IMAGE_USER}`,
          'WORKDIR /data',
          `CMD ${JSON.stringify(recipe.command)}`,
        ],
      } as never
    )) as unknown as NodeJS.ReadableStream
    await new Promise<void>((resolve, reject) => {
      docker.modem.followProgress(response, (error: Error | null, events: any[]) => {
        const failed = events?.find((event) => event?.error)
        if (error || failed) reject(error ?? new Error(String(failed.error)))
        else resolve()
      })
    })
    await tar.done
  } finally {
    await rm(root, { recursive: true, force: true })
  }
}

/** `repo[:tag]` with a registry port (`host:5000/repo:tag`) kept in the repo. */
export function splitTag(reference: string): [string, string] {
  const colon = reference.lastIndexOf(':')
  if (colon > reference.lastIndexOf('/')) {
    return [reference.slice(0, colon), reference.slice(colon + 1)]
  }
  return [reference, 'latest']
}
