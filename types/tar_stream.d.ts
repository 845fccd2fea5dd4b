/**
 * The part of tar-stream 2.x (no types of its own) that app/backups uses:
 * a streaming tar writer (`pack`) and reader (`extract`).
 */
declare module 'tar-stream' {
  import type { Readable, Writable } from 'node:stream'

  export type EntryType =
    | 'file'
    | 'link'
    | 'symlink'
    | 'directory'
    | 'block-device'
    | 'character-device'
    | 'fifo'
    | 'contiguous-file'
    | 'pax-header'
    | 'pax-global-header'
    | 'gnu-long-link-path'
    | 'gnu-long-path'

  export interface Headers {
    name: string
    size?: number
    mode?: number
    mtime?: Date
    type?: EntryType
    linkname?: string | null
    uid?: number
    gid?: number
  }

  export interface Pack extends Readable {
    entry(headers: Headers, buffer: Buffer | string, callback?: (error?: Error) => void): Writable
    entry(headers: Headers, callback?: (error?: Error) => void): Writable
    finalize(): void
  }

  export interface Extract extends Writable {
    on(
      event: 'entry',
      listener: (headers: Headers, stream: Readable, next: (error?: unknown) => void) => void
    ): this
    on(event: string | symbol, listener: (...args: any[]) => void): this
  }

  export function pack(): Pack
  export function extract(): Extract
}
