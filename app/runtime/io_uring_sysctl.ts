import { readFileSync, writeFileSync } from 'node:fs'

/**
 * `kernel.io_uring_disabled` (Linux 6.6+): at 1, io_uring needs
 * CAP_SYS_ADMIN or membership of `kernel.io_uring_group`, which no agent
 * has (no capabilities, groups cleared). Host-wide: other unprivileged
 * programs lose io_uring too (docs/runtime.md "Isolation"). Used where no
 * seccomp filter of the service's own can refuse io_uring: the unshare
 * sandbox without setpriv's --seccomp-filter, and Docker engines whose
 * default seccomp profile still allows io_uring (before 25.0).
 */
export const IO_URING_SYSCTL = '/proc/sys/kernel/io_uring_disabled'

/** The sysctl's value, or undefined where the kernel has none. */
export function ioUringDisabledLevel(): number | undefined {
  try {
    return Number(readFileSync(IO_URING_SYSCTL, 'utf8').trim())
  } catch {
    return undefined
  }
}

/** Sets kernel.io_uring_disabled to 1 when it is 0; true when it changed it. */
export function disableIoUringForUnprivileged(forWhat: string): boolean {
  if ((ioUringDisabledLevel() ?? 0) >= 1) return false
  try {
    writeFileSync(IO_URING_SYSCTL, '1\n')
  } catch (error) {
    throw new Error(
      `${forWhat} could not refuse io_uring: setting kernel.io_uring_disabled=1 failed (${(error as Error).message})`,
      { cause: error }
    )
  }
  return true
}
