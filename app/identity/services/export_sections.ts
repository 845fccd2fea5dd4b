/**
 * Sections of the personal data export. Each area contributes its own (a
 * collector in its service, registered by the preload start/export_sections.ts)
 * without touching the export code:
 *
 *   exportSections.register('agents', agentsForExport)
 *
 * A section is written to the ZIP as `<name>.json`. Values of fields whose
 * name ends in key, token, secret or password are replaced by `***` in every
 * section before writing, as a safety net; sections should still leave
 * secrets out.
 */
export type ExportSectionCollector = (userId: string) => Promise<unknown>

const NAME = /^[a-z][a-z0-9_]{0,63}$/

export class ExportSectionRegistry {
  #sections = new Map<string, ExportSectionCollector>()

  /** Adds (or, on reload, replaces) the section `name`. */
  register(name: string, collect: ExportSectionCollector): void {
    if (!NAME.test(name)) {
      throw new Error(`Export section name "${name}" must be snake_case (a-z, 0-9, _)`)
    }
    this.#sections.set(name, collect)
  }

  names(): string[] {
    return [...this.#sections.keys()]
  }

  entries(): [string, ExportSectionCollector][] {
    return [...this.#sections.entries()]
  }
}

export const exportSections = new ExportSectionRegistry()

const SECRET_FIELD = /(key|token|secret|password)$/i

/** Deep copy with secret-named fields masked as `***` (CONTRACT.md rule). */
export function maskSecretFields(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(maskSecretFields)
  if (value instanceof Date) return value.toISOString()
  if (value && typeof value === 'object') {
    const source =
      typeof (value as { toJSON?: () => unknown }).toJSON === 'function'
        ? (value as { toJSON: () => unknown }).toJSON()
        : value
    if (source !== value) return maskSecretFields(source)
    const out: Record<string, unknown> = {}
    for (const [field, inner] of Object.entries(value as Record<string, unknown>)) {
      out[field] =
        SECRET_FIELD.test(field) && inner !== null && inner !== undefined && inner !== ''
          ? '***'
          : maskSecretFields(inner)
    }
    return out
  }
  return value
}
