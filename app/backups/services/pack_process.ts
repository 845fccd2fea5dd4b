/**
 * The archive packer's own process (archive_packer.ts starts it at the
 * lowest CPU priority): reads `{ target, input }` as JSON on stdin, writes
 * the archive (archive_writer.ts) and answers its `{ size, sha256 }` as
 * JSON on stdout; on failure exit code 1 and the reason on stderr (the
 * writer leaves no file behind).
 */
import { text } from 'node:stream/consumers'
import { writeArchive, type ArchiveInput } from '#backups/services/archive_writer'

const request = JSON.parse(await text(process.stdin)) as { target: string; input: ArchiveInput }
try {
  const written = await writeArchive(request.target, request.input)
  process.stdout.write(JSON.stringify(written))
} catch (error) {
  process.stderr.write((error as Error).message)
  process.exitCode = 1
}
