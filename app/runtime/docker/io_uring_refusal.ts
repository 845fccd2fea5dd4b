import type Docker from 'dockerode'
import { disableIoUringForUnprivileged, ioUringDisabledLevel } from '#runtime/io_uring_sysctl'

/**
 * Docker's default seccomp profile allows io_uring before engine 25.0
 * (a large kernel attack surface): on such a local engine, as root, the
 * service sets kernel.io_uring_disabled=1 as the unshare sandbox does
 * (app/runtime/io_uring_sysctl.ts), so containers (no CAP_SYS_ADMIN) are
 * refused it; where it cannot, the log says io_uring stays open to them.
 * Done once per driver (again after a failure).
 */
export class IoUringRefusal {
  #ioUringRefused?: Promise<void>

  constructor(
    private readonly docker: Docker,
    private readonly log: (message: string) => void
  ) {}

  ensure(): Promise<void> {
    this.#ioUringRefused ??= (async () => {
      const { Version } = await this.docker.version()
      if (!(Number(/^(\d+)\./.exec(Version ?? '')?.[1]) < 25)) return
      const open = `Docker ${Version}'s default seccomp profile allows io_uring in containers`
      const remote = process.env.DOCKER_HOST && !process.env.DOCKER_HOST.startsWith('unix://')
      if (remote) {
        this.log(`WARNING: ${open}; set kernel.io_uring_disabled=1 on the engine's host`)
        return
      }
      if (process.getuid?.() !== 0 || ioUringDisabledLevel() === undefined) {
        if ((ioUringDisabledLevel() ?? 0) < 1) {
          this.log(`WARNING: ${open} and kernel.io_uring_disabled cannot be set here`)
        }
        return
      }
      if (disableIoUringForUnprivileged('the docker driver')) {
        this.log(
          `set kernel.io_uring_disabled=1: ${open}; io_uring now needs CAP_SYS_ADMIN on this host, which containers never have`
        )
      }
    })().catch((error) => {
      this.#ioUringRefused = undefined
      throw error
    })
    return this.#ioUringRefused
  }
}
