import type Docker from 'dockerode'
import type { ContainerLaunch, LocalImageRecipe } from '#plugins/types'
import { ignoreStatus } from '#runtime/docker/engine_calls'
import {
  buildLocalImage,
  IMAGE_USER,
  localImageTag,
  type StagedPackage,
  type StagedPythonEnvironment,
} from '#runtime/docker/local_images'
import { PackageCache } from '#runtime/package_cache'
import { PythonPackageCache } from '#runtime/python_cache'

export type ImageSource = 'auto' | 'registry' | 'local'

/**
 * The images agents' containers run (AGENT_IMAGES, docs/runtime.md "Docker
 * images"): the framework's official image, pulled when missing, or the one
 * built on the engine from its plugin's recipe (local_images.ts).
 */
export class DockerImages {
  /** One build per tag at a time (concurrent starts of one framework share it). */
  readonly #builds = new Map<string, Promise<void>>()

  constructor(
    private readonly docker: Docker,
    private readonly options: {
      images?: ImageSource
      /** `<storage>/runtime`: the npm cache local images take framework packages from. */
      cacheDir?: string
      log: (message: string) => void
    }
  ) {}

  async #hasImage(image: string) {
    return Boolean(await ignoreStatus(this.docker.getImage(image).inspect(), 404))
  }

  /** The launch to run: the official image, or the locally built one when it cannot be pulled. */
  async resolve(launch: ContainerLaunch): Promise<ContainerLaunch> {
    const source = this.options.images ?? 'auto'
    const recipe = launch.localImage
    if (source !== 'local' || !recipe) {
      if (await this.#hasImage(launch.image)) return launch
      try {
        await this.#pull(launch.image)
        return launch
      } catch (error) {
        if (source === 'registry' || !recipe) throw error
        this.options.log(
          `could not pull ${launch.image} (${(error as Error).message}); building locally`
        )
      }
    }
    const tag = localImageTag(recipe)
    if (!(await this.#hasImage(tag))) await this.#build(recipe)
    return { ...launch, image: tag, command: recipe.command, user: IMAGE_USER }
  }

  #build(recipe: LocalImageRecipe): Promise<void> {
    const log = this.options.log
    const tag = localImageTag(recipe)
    let pending = this.#builds.get(tag)
    if (!pending) {
      pending = (async () => {
        log(`building ${tag} locally`)
        const packages: StagedPackage[] = []
        const installed: Array<{ name: string; packageDir: string }> = []
        for (const { name, version } of recipe.npmPackages ?? []) {
          if (!this.options.cacheDir) throw new Error(`${recipe.tag} needs the runtime npm cache`)
          const cache = new PackageCache({ cacheDir: this.options.cacheDir, log })
          const { packageDir } = await cache.ensure(name, version)
          packages.push({ name, hostRoot: cache.location(name, version).root })
          installed.push({ name, packageDir })
        }
        await recipe.prepare?.(installed)
        let python: StagedPythonEnvironment | undefined
        if (recipe.pythonEnvironment) {
          if (!this.options.cacheDir) throw new Error(`${recipe.tag} needs the runtime cache`)
          const { name, requirements } = recipe.pythonEnvironment
          const { venvDir } = await new PythonPackageCache({
            cacheDir: this.options.cacheDir,
            log,
          }).ensure(name, requirements)
          python = { name, venvDir }
        }
        await buildLocalImage(this.docker, recipe, { packages, python, log })
        log(`built ${tag}`)
      })().finally(() => this.#builds.delete(tag))
      this.#builds.set(tag, pending)
    }
    return pending
  }

  async #pull(image: string) {
    this.options.log(`pulling ${image}`)
    const stream = await this.docker.pull(image)
    let last = 0
    await new Promise<void>((resolve, reject) => {
      this.docker.modem.followProgress(
        stream,
        (error: Error | null) => (error ? reject(error) : resolve()),
        (event: { status?: string; progress?: string; id?: string }) => {
          if (Date.now() - last < 3000) return
          last = Date.now()
          this.options.log(
            `pulling ${image}: ${event.status ?? ''} ${event.id ?? ''} ${event.progress ?? ''}`.trim()
          )
        }
      )
    })
    this.options.log(`pulled ${image}`)
  }
}
