import { existsSync } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { writeFileAtomic } from '#core/files/atomic_file'

/**
 * A seccomp filter for the process sandbox (bubblewrap `--seccomp`): every
 * io_uring system call fails with ENOSYS, everything else is allowed.
 *
 * Why: io_uring is a large kernel attack surface (Docker's default profile
 * blocks it too), and a process holding an io_uring instance cannot be
 * checkpointed by CRIU, which is what makes a sleeping agent wake in about a
 * second (docs/runtime.md "Sleep and wake"). libuv (Node.js) falls back to
 * epoll when io_uring_setup fails, so frameworks run unchanged.
 *
 * Classic BPF, written out here because it is nine instructions; a library
 * (libseccomp) would add a native dependency for no gain.
 */

const BPF_LD_W_ABS = 0x20
const BPF_JEQ_K = 0x15
const BPF_RET_K = 0x06
const SECCOMP_RET_ALLOW = 0x7fff0000
const SECCOMP_RET_ERRNO = 0x00050000
const ENOSYS = 38
/** offsetof(struct seccomp_data, nr) and (…, arch). */
const DATA_NR = 0
const DATA_ARCH = 4

/** io_uring_setup, io_uring_enter, io_uring_register: the same numbers on x86_64 and arm64. */
const IO_URING_SYSCALLS = [425, 426, 427]
const ARCHES: Record<string, number> = {
  x64: 0xc000003e, // AUDIT_ARCH_X86_64
  arm64: 0xc00000b7, // AUDIT_ARCH_AARCH64
}

type Instruction = [code: number, jumpTrue: number, jumpFalse: number, k: number]

/** The filter as `struct sock_filter[]` bytes, or undefined on an architecture it does not know. */
export function ioUringFilterProgram(arch = process.arch): Buffer | undefined {
  const auditArch = ARCHES[arch]
  if (auditArch === undefined) return undefined
  const last = IO_URING_SYSCALLS.length
  const program: Instruction[] = [
    [BPF_LD_W_ABS, 0, 0, DATA_ARCH],
    // Another ABI (x32, compat): its numbers differ; allow rather than guess.
    [BPF_JEQ_K, 1, 0, auditArch],
    [BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW],
    [BPF_LD_W_ABS, 0, 0, DATA_NR],
    ...IO_URING_SYSCALLS.map((nr, index): Instruction => [BPF_JEQ_K, last - index, 0, nr]),
    [BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW],
    [BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | ENOSYS],
  ]
  const bytes = Buffer.alloc(program.length * 8)
  program.forEach(([code, jumpTrue, jumpFalse, k], index) => {
    bytes.writeUInt16LE(code, index * 8)
    bytes.writeUInt8(jumpTrue, index * 8 + 2)
    bytes.writeUInt8(jumpFalse, index * 8 + 3)
    bytes.writeUInt32LE(k >>> 0, index * 8 + 4)
  })
  return bytes
}

/**
 * The filter's file under `dir` (written once, atomically), for bubblewrap
 * to read from an inherited descriptor; undefined where no filter applies.
 */
export async function ioUringFilterFile(dir: string): Promise<string | undefined> {
  const program = ioUringFilterProgram()
  if (!program) return undefined
  const file = join(dir, `no-io-uring-${process.arch}.bpf`)
  if (existsSync(file)) return file
  await mkdir(dir, { recursive: true })
  // Two agents starting at once (in one service or in two on the same storage)
  // each stage and rename their own copy; the same bytes win either way.
  await writeFileAtomic(file, program, { mode: 0o644 })
  return file
}
