import Docker from 'dockerode'
import { dockerConfigured } from '#runtime/docker/docker_driver'

/** True (and says so) when no Docker engine answers here: the live docker tests skip then. */
export async function noDockerEngine(): Promise<boolean> {
  const up =
    dockerConfigured() &&
    (await new Docker().ping().then(
      () => true,
      () => false
    ))
  if (!up) console.log('  SKIPPED: no Docker engine')
  return !up
}
