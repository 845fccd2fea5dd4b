import { existsSync } from 'node:fs'
import { readdir, readFile } from 'node:fs/promises'
import { isAbsolute, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { RouteJSON } from '@adonisjs/core/types/http'
import { AutoSwagger } from 'adonis-autoswagger/dist/autoswagger.js'
import { jsDocLines } from '#core/openapi/controller_source'
import { exampleFromSchema, markJsonNulls, type Schema } from '#core/openapi/schema_tools'

/** What adonis-autoswagger reads from a method's JSDoc (`@summary`, `@responseBody`...). */
export interface Annotations {
  summary?: string
  description?: string
  tag?: string
  operationId?: string
  responses?: Record<string, Schema>
  requestBody?: Schema
  parameters?: Record<string, Schema>
}

/** The controller file and method behind a route, and its annotations. */
export interface RouteSource {
  sourceFile: string
  action: string
  annotations?: Annotations
}

export interface EngineInput {
  routes: RouteJSON[]
  /** Folder holding the TypeScript sources (app/, package.json), or null when absent. */
  sourceRoot: string | null
  /** Folder of the running code (source root in dev and tests, build/ when built). */
  runtimeRoot: string
  /** Route patterns autoswagger must skip (its `ignore` syntax). */
  ignore: string[]
  info: Schema
}

export interface EngineOutput {
  document: Schema
  sources: Map<RouteJSON, RouteSource>
  /** Validator export name -> JSON schema (also in components.schemas). */
  validators: Map<string, Schema>
  /** Annotation lines autoswagger could not read (dropped, not fatal). */
  warnings: string[]
}

interface HandlerInfo {
  sourceFile: string
  action: string
  customAnnotations?: Record<string, Annotations>
  operationId: string
}

/**
 * The parts of adonis-autoswagger used below. Its .d.ts marks them private,
 * but they are its only extension points: `generate` (json() would read a
 * pre-written swagger.json whenever NODE_ENV=production) and the finders it
 * calls for schemas and handler files, which only know v6's flat app/models
 * and app/validators folders.
 */
interface Internals {
  customPaths: Record<string, string>
  commentParser: { parseAnnotations(lines: string[]): Annotations }
  modelParser: { parseModelProperties(source: string): ParsedModel }
  generate(routes: { root: unknown[] }, options: Schema): Promise<Schema>
  getSchemas(): Promise<Record<string, Schema>>
  getValidators(): Promise<Record<string, Schema>>
  getModels(): Promise<Record<string, Schema>>
  getDataBasedOnAdonisVersion(route: unknown): Promise<HandlerInfo>
}

/**
 * autoswagger throws on some lines (a `null` in a JSON example, or
 * `@responseBody 204` with nothing after it), which would take the whole
 * document down: nulls are masked first (see NULL_MARKER); on any other
 * failure the block is parsed line by line, dropping only unreadable lines.
 */
function tolerantParser(parse: (lines: string[]) => Annotations, warnings: string[]) {
  return (raw: string[]): Annotations => {
    const lines = raw.map(markJsonNulls)
    try {
      return parse(lines)
    } catch {
      // autoswagger reads these fields without checking them: keep its defaults.
      const merged: Annotations = {
        summary: '',
        description: '',
        tag: '',
        responses: {},
        parameters: {},
      }
      for (const line of lines) {
        try {
          const one = parse([line])
          for (const key of ['summary', 'description', 'tag', 'operationId'] as const) {
            if (one[key]) merged[key] = one[key]
          }
          Object.assign(merged.responses!, one.responses)
          Object.assign(merged.parameters!, one.parameters)
          if (one.requestBody) merged.requestBody = one.requestBody
        } catch {
          warnings.push(`OpenAPI: cannot read annotation line "${line.trim()}"`)
        }
      }
      return merged
    }
  }
}

interface ParsedModel {
  name: string
  props: Schema
  required: string[]
}

async function filesUnder(dir: string, accept: (path: string) => boolean): Promise<string[]> {
  if (!existsSync(dir)) return []
  const entries = await readdir(dir, { recursive: true, withFileTypes: true })
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name))
    .filter(accept)
    .sort()
}

const isModule = (path: string) => /\.(ts|js)$/.test(path) && !path.endsWith('.d.ts')

/**
 * Validators live in each area (app/<area>/validators/*). They are imported
 * from the running code (so this works in build/ too) and described with
 * VineJS's own `toJSONSchema()`. Export names are the schema names used in
 * `@requestBody <name>`, so they must be unique across areas.
 */
async function loadValidators(
  runtimeRoot: string,
  warnings: string[]
): Promise<Map<string, Schema>> {
  const files = await filesUnder(
    join(runtimeRoot, 'app'),
    (path) => isModule(path) && /[\\/]validators[\\/]/.test(path)
  )
  const validators = new Map<string, Schema>()
  for (const file of files) {
    let module: Record<string, unknown>
    try {
      module = await import(pathToFileURL(file).href)
    } catch (error) {
      warnings.push(`OpenAPI: cannot load validators of ${file}: ${(error as Error).message}`)
      continue
    }
    for (const [name, value] of Object.entries(module)) {
      const validator = value as { toJSONSchema?: () => Schema; validate?: unknown }
      if (
        typeof validator?.toJSONSchema !== 'function' ||
        typeof validator.validate !== 'function'
      ) {
        continue
      }
      let schema: Schema
      try {
        schema = validator.toJSONSchema()
        delete schema.$schema
      } catch {
        schema = { type: 'object' }
      }
      schema.description = `${name} (validator)`
      schema.example = exampleFromSchema(schema)
      validators.set(name, schema)
    }
  }
  return validators
}

/**
 * Schema for a model field whose TypeScript type autoswagger's model parser
 * could not map (it emits a `$ref` to the type's text): literal unions become
 * enums, records objects; other aliases stay untyped rather than dangling.
 */
function schemaForTsType(text: string, models: Record<string, Schema>): Schema {
  const members = text
    .split('|')
    .map((member) => member.trim())
    .filter((member) => member !== 'null' && member !== 'undefined')
  if (members.length > 0 && members.every((member) => /^(['"]).*\1$/.test(member))) {
    return { type: 'string', enum: members.map((member) => member.slice(1, -1)) }
  }
  const [only] = members
  if (members.length !== 1) return {}
  if (only.endsWith('[]'))
    return { type: 'array', items: schemaForTsType(only.slice(0, -2), models) }
  if (only in models) return { $ref: `#/components/schemas/${only}` }
  if (/^(Record<|\{|object$)/.test(only)) return { type: 'object' }
  return { description: `TypeScript type ${only}` }
}

/** Lucid models in every area (app/<area>/models/*.ts), parsed from source by autoswagger. */
async function loadModels(engine: Internals, sourceRoot: string): Promise<Record<string, Schema>> {
  const files = await filesUnder(
    join(sourceRoot, 'app'),
    (path) => path.endsWith('.ts') && /[\\/]models[\\/]/.test(path)
  )
  const models: Record<string, Schema> = {}
  const fieldTypes = new Map<string, Map<string, string>>()
  for (const file of files) {
    const source = await readFile(file, 'utf8')
    const parsed = engine.modelParser.parseModelProperties(source)
    if (!parsed.name) continue
    models[parsed.name] = {
      type: 'object',
      properties: parsed.props,
      ...(parsed.required.length > 0 ? { required: parsed.required } : {}),
      description: `${parsed.name} (model)`,
    }
    const declared = [...source.matchAll(/declare\s+(\w+)\s*[!?]?\s*:\s*([^\n;=]+)/g)]
    fieldTypes.set(parsed.name, new Map(declared.map((m) => [m[1], m[2].trim()])))
  }
  for (const [name, model] of Object.entries(models)) {
    for (const [field, prop] of Object.entries<Schema>(model.properties)) {
      const ref: unknown = prop.$ref ?? prop.items?.$ref
      const target = typeof ref === 'string' ? ref.split('/').pop()! : null
      if (!target || target in models) continue
      const text = fieldTypes.get(name)?.get(field)
      model.properties[field] = text ? schemaForTsType(text, models) : {}
    }
  }
  return models
}

/**
 * Runs adonis-autoswagger over the live routes, adapted to this app:
 * - routes are passed as copies, because v7's `router.toJSON()` returns the
 *   router's own route objects and autoswagger overwrites `route.middleware`;
 * - `#area/*` handler paths are made absolute under the source root, so the
 *   controller files are found whatever the working folder (the built server
 *   runs from build/, where only compiled .js files exist);
 * - validators and models are collected from every area folder;
 * - a method whose JSDoc lacks the leading `@<method>` line autoswagger looks
 *   for still gets its block parsed by autoswagger's comment parser;
 * - the controller file and method behind each route are recorded for the
 *   normaliser (which also restores `@description`, see document_builder).
 */
export async function runAutoswagger(input: EngineInput): Promise<EngineOutput> {
  const engine = new AutoSwagger() as unknown as Internals
  const base = {
    getSchemas: engine.getSchemas.bind(engine),
    handler: engine.getDataBasedOnAdonisVersion.bind(engine),
  }
  const { sourceRoot } = input
  const sources = new Map<RouteJSON, RouteSource>()
  const warnings: string[] = []
  const validators = await loadValidators(input.runtimeRoot, warnings)
  const originals = new Map<unknown, RouteJSON>()
  const copies = input.routes.map((route) => {
    const copy = { ...route }
    originals.set(copy, route)
    return copy
  })

  engine.getSchemas = async () => {
    // generate() has just made the comment parser and read package.json "imports".
    const parser = engine.commentParser
    parser.parseAnnotations = tolerantParser(parser.parseAnnotations.bind(parser), warnings)
    if (sourceRoot) {
      for (const [alias, path] of Object.entries(engine.customPaths)) {
        if (!isAbsolute(path)) engine.customPaths[alias] = join(sourceRoot, path)
      }
    }
    return base.getSchemas()
  }
  engine.getValidators = async () => Object.fromEntries(validators)
  engine.getModels = async () => (sourceRoot ? loadModels(engine, sourceRoot) : {})

  engine.getDataBasedOnAdonisVersion = async (route) => {
    // Without sources there is nothing to read: describe the route from the router alone.
    const info: HandlerInfo = sourceRoot
      ? await base.handler(route)
      : { sourceFile: '', action: '', operationId: '' }
    let annotations = info.customAnnotations?.[info.action]
    if (!annotations && info.sourceFile && info.action && existsSync(info.sourceFile)) {
      const lines = jsDocLines(await readFile(info.sourceFile, 'utf8'), info.action)
      if (lines) {
        annotations = engine.commentParser.parseAnnotations(lines)
        info.customAnnotations = { ...info.customAnnotations, [info.action]: annotations }
      }
    }
    const original = originals.get(route)
    if (original) {
      sources.set(original, { sourceFile: info.sourceFile, action: info.action, annotations })
    }
    return info
  }

  const document = await engine.generate(
    { root: copies },
    {
      path: `${sourceRoot ?? input.runtimeRoot}/`,
      info: input.info,
      tagIndex: 1,
      snakeCase: false,
      ignore: input.ignore,
      common: { parameters: {}, headers: {} },
      preferredPutPatch: 'PUT',
      debug: false,
    }
  )
  return { document, sources, validators, warnings }
}
