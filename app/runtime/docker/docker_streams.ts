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
