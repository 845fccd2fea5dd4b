import type Docker from 'dockerode'

/**
 * The Engine API multiplexes stdout and stderr of a container without a
 * TTY: frames of an 8-byte header (stream type, 3 zero bytes, big-endian
 * payload size) then the payload. This splits them back into text.
 */
export class DockerStreamDemuxer {
  #pending = Buffer.alloc(0)

  /** Feeds raw bytes; returns the payload text of every complete frame. */
  push(chunk: Buffer): string {
    this.#pending = Buffer.concat([this.#pending, chunk])
    let text = ''
    while (this.#pending.length >= 8) {
      const type = this.#pending[0]
      if (type > 2 || this.#pending[1] || this.#pending[2] || this.#pending[3]) {
        // Not multiplexed (a TTY container): the bytes are the text.
        text += this.#pending.toString('utf8')
        this.#pending = Buffer.alloc(0)
        break
      }
      const size = this.#pending.readUInt32BE(4)
      if (this.#pending.length < 8 + size) break
      text += this.#pending.subarray(8, 8 + size).toString('utf8')
      this.#pending = this.#pending.subarray(8 + size)
    }
    return text
  }
}

export function demuxDockerLogs(raw: Buffer): string {
  return new DockerStreamDemuxer().push(raw)
}

/** Lines out of text arriving in pieces. */
export class LineSplitter {
  #partial = ''

  push(text: string): string[] {
    const lines = (this.#partial + text).split('\n')
    this.#partial = lines.pop() ?? ''
    return lines.map((line) => line.replace(/\r$/, ''))
  }

  flush(): string[] {
    const rest = this.#partial
    this.#partial = ''
    return rest ? [rest] : []
  }
}

/** The last `tail` lines of a container's output (stdout and stderr). */
export async function containerLogs(container: Docker.Container, tail: number): Promise<string[]> {
  const raw = (await container.logs({
    stdout: true,
    stderr: true,
    follow: false,
    tail,
  })) as unknown as Buffer
  const lines = demuxDockerLogs(Buffer.isBuffer(raw) ? raw : Buffer.from(String(raw))).split('\n')
  if (lines.at(-1) === '') lines.pop()
  return lines.slice(-tail)
}

/** A container's output line by line, after its last `tail` lines, until `signal` aborts. */
export async function* followContainerLogs(
  container: Docker.Container,
  options: { tail?: number; signal?: AbortSignal }
) {
  const stream = (await container.logs({
    stdout: true,
    stderr: true,
    follow: true,
    tail: options.tail ?? 0,
  })) as unknown as NodeJS.ReadableStream & { destroy(): void }
  const stop = () => stream.destroy()
  options.signal?.addEventListener('abort', stop, { once: true })
  const demuxer = new DockerStreamDemuxer()
  const lines = new LineSplitter()
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      for (const line of lines.push(demuxer.push(chunk))) yield line
      if (options.signal?.aborted) return
    }
    for (const line of lines.flush()) yield line
  } catch (error) {
    if (!options.signal?.aborted) throw error
  } finally {
    options.signal?.removeEventListener('abort', stop)
    stream.destroy()
  }
}
