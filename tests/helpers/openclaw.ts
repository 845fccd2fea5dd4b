import { PackageCache } from '#runtime/package_cache'
import { OPENCLAW_VERSION } from '../../plugins/openclaw/index.ts'
import { sharedCacheDir } from '#tests/helpers/runtime'

let installProblem: string | undefined
let installChecked = false

/**
 * Installs the pinned OpenClaw package into the shared runtime cache
 * (downloads from the npm registry on the first run, like an image pull).
 * True when that is impossible (tests using the real gateway are skipped,
 * with the reason printed).
 */
export async function openclawUnavailable(): Promise<boolean> {
  if (!installChecked) {
    installChecked = true
    const cache = new PackageCache({
      cacheDir: sharedCacheDir(),
      log: (message) => console.log(`  [runtime cache] ${message}`),
    })
    try {
      await cache.ensure('openclaw', OPENCLAW_VERSION)
    } catch (error) {
      installProblem = (error as Error).message
      console.log(
        `  SKIPPED: openclaw@${OPENCLAW_VERSION} could not be installed: ${installProblem}`
      )
    }
  }
  return installProblem !== undefined
}
