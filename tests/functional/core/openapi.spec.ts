import { test } from '@japa/runner'
import router from '@adonisjs/core/services/router'
import type { RouteJSON } from '@adonisjs/core/types/http'
import { Validator } from '@seriousme/openapi-schema-validator'
import { baseUrl } from '#tests/helpers/http'
import openApiService, { isExcluded } from '#core/openapi/openapi_service'
import vine from '@vinejs/vine'
import { DocumentBuilder } from '#core/openapi/document_builder'
import { apiContracts, defineContracts } from '#core/openapi/contracts'
import { CREDENTIAL_REQUIRED } from '#core/openapi/route_security'
import { t } from '#core/openapi/shapes'
import { GoneException, NotFoundException } from '#core/exceptions/api_exceptions'

type Doc = Record<string, any>

async function fetchDocument(): Promise<{ status: number; type: string; doc: Doc }> {
  const response = await fetch(`${baseUrl()}/openapi.json`)
  return {
    status: response.status,
    type: response.headers.get('content-type') ?? '',
    doc: (await response.json()) as Doc,
  }
}

/** Written independently of the code under test: `/a/:id/b/:x?` -> `/a/{id}/b/{x}`. */
function toTemplate(pattern: string): string {
  const path = pattern.replace(/:([^/?]+)\??/g, '{$1}').replace(/\/$/, '')
  return path === '' ? '/' : path
}

function middlewareNames(route: RouteJSON): { name?: string; args?: any }[] {
  return [...(route.middleware as any).all()].filter((m) => typeof m === 'object')
}

/** A plain-function middleware marked as demanding a credential (the /api/v1 key check). */
function hasMarkedAuthFunction(route: RouteJSON): boolean {
  return [...(route.middleware as any).all()].some(
    (m) => typeof m === 'function' && CREDENTIAL_REQUIRED in m
  )
}

/** Follows a local `$ref` (one level is all the document uses). */
function deref(doc: Doc, schema: Doc): Doc {
  if (!schema?.$ref) return schema
  return schema.$ref
    .replace(/^#\//, '')
    .split('/')
    .reduce((node: Doc, key: string) => node?.[key], doc)
}

const PUBLIC_ROUTES: [string, string][] = [
  ['get', '/health'],
  ['get', '/openapi.json'],
  ['get', '/docs'],
  ['get', '/features'],
  ['get', '/referrals/validate/{code}'],
  ['get', '/agents/by-slug/{slug}'],
  ['post', '/auth/register'],
  ['post', '/auth/login'],
  ['post', '/auth/refresh'],
  ['post', '/auth/resend-verification'],
  ['get', '/auth/verify-email/{token}'],
  ['post', '/webhooks/in/{token}'],
]

test.group('OpenAPI document', () => {
  test('GET /openapi.json is a valid OpenAPI document, not wrapped in the envelope', async ({
    assert,
  }) => {
    const { status, type, doc } = await fetchDocument()
    assert.equal(status, 200)
    assert.include(type, 'application/json')
    assert.notProperty(doc, 'success')
    assert.match(doc.openapi, /^3\.1\./)

    const validator = new Validator()
    const result = await validator.validate(doc)
    assert.isTrue(result.valid, JSON.stringify(result.errors, null, 2))
    // Every $ref must resolve (the validator throws on a dangling one).
    assert.doesNotThrow(() => validator.resolveRefs())
  })

  test('every route of the live router is described, test-only routes are not', async ({
    assert,
  }) => {
    const { doc } = await fetchDocument()
    const routes = router.toJSON().root
    assert.isAbove(routes.length, 3)

    const expected = new Set<string>()
    for (const route of routes) {
      if (isExcluded(route.pattern)) continue
      for (const method of route.methods) {
        if (method === 'HEAD') continue
        expected.add(`${method.toLowerCase()} ${toTemplate(route.pattern)}`)
      }
    }
    const described = new Set<string>()
    for (const [path, operations] of Object.entries<Doc>(doc.paths)) {
      for (const method of Object.keys(operations)) described.add(`${method} ${path}`)
    }
    assert.deepEqual([...described].sort(), [...expected].sort())
    assert.isFalse(Object.keys(doc.paths).some((path) => isExcluded(path)))
    assert.isFalse(Object.keys(doc.paths).some((path) => path.startsWith('/console')))

    // Each {param} of a path is declared as a required path parameter.
    for (const [path, operations] of Object.entries<Doc>(doc.paths)) {
      const names = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1])
      for (const [method, op] of Object.entries<Doc>(operations)) {
        const declared = (op.parameters ?? []).filter((p: Doc) => p.in === 'path')
        assert.sameMembers(
          declared.map((p: Doc) => p.name),
          names,
          `${method} ${path}`
        )
        assert.isTrue(
          declared.every((p: Doc) => p.required === true),
          `${method} ${path}`
        )
      }
    }
  })

  test('routes without the auth middleware need no credential; auth routes need bearer', async ({
    assert,
  }) => {
    const { doc } = await fetchDocument()
    assert.deepEqual(doc.components.securitySchemes.bearerAuth, {
      type: 'http',
      scheme: 'bearer',
      description: doc.components.securitySchemes.bearerAuth.description,
    })

    for (const [method, path] of PUBLIC_ROUTES.slice(0, 3)) {
      assert.deepEqual(doc.paths[path][method].security, [], `${method} ${path}`)
    }
    // The programmatic API's key check is a marked function middleware, not a named one.
    for (const [method, path] of [
      ['get', '/api/v1/me'],
      ['get', '/api/v1/agents'],
      ['post', '/api/v1/agents/{id}/chat'],
    ]) {
      assert.deepEqual(doc.paths[path][method].security, [{ bearerAuth: [] }], `${method} ${path}`)
    }
    for (const [method, path] of PUBLIC_ROUTES) {
      const op = doc.paths[path]?.[method]
      if (!op) continue // that area is not built yet
      const anonymousAllowed =
        op.security.length === 0 || op.security.some((s: Doc) => Object.keys(s).length === 0)
      assert.isTrue(anonymousAllowed, `${method} ${path} must need no credential`)
    }

    for (const route of router.toJSON().root) {
      if (isExcluded(route.pattern)) continue
      const auth = middlewareNames(route).find((m) => m.name === 'auth')
      const optional = middlewareNames(route).some((m) =>
        ['optionalAuth', 'silentAuth'].includes(m.name ?? '')
      )
      for (const method of route.methods.filter((m) => m !== 'HEAD')) {
        const op = doc.paths[toTemplate(route.pattern)][method.toLowerCase()]
        const where = `${method} ${route.pattern}`
        if ((auth && !auth.args?.optional) || hasMarkedAuthFunction(route)) {
          assert.deepEqual(op.security, [{ bearerAuth: [] }], where)
          assert.property(op.responses, '401', where)
        } else if (auth || optional) {
          assert.deepEqual(op.security, [{}, { bearerAuth: [] }], where)
        } else {
          assert.deepEqual(op.security, [], where)
        }
      }
    }
  })

  test('the security rule reads the auth middleware of any route', async ({ assert }) => {
    const stack = (entries: object[]) => ({ all: () => new Set(entries) })
    const fake = (pattern: string, method: string, middleware: object[]) =>
      ({
        pattern,
        methods: [method],
        domain: 'root',
        meta: {},
        handler: () => ({}),
        middleware: stack(middleware),
      }) as unknown as RouteJSON
    const routes = [
      fake('/things/:id', 'DELETE', [{ name: 'auth', args: { guards: ['api'] } }]),
      fake('/things/by-name/:name', 'GET', [{ name: 'optionalAuth' }]),
      fake('/open', 'POST', [{ name: '' }]),
    ]
    // Routes without contracts are still described, from the router alone.
    const { document, warnings } = await new DocumentBuilder({
      routes,
      contractOf: () => undefined,
      info: { title: 't', version: '1' },
      errorCodes: ['AUTH_REQUIRED'],
    }).build()
    assert.lengthOf(warnings, 3)

    assert.deepEqual(document.paths['/things/{id}'].delete.security, [{ bearerAuth: [] }])
    const unauthorized =
      document.paths['/things/{id}'].delete.responses['401'].content['application/json'].schema
    assert.equal(unauthorized.allOf[0].$ref, '#/components/schemas/ErrorEnvelope')
    assert.deepEqual(unauthorized.properties.code.enum, ['AUTH_REQUIRED'])
    assert.deepEqual(document.paths['/things/by-name/{name}'].get.security, [
      {},
      { bearerAuth: [] },
    ])
    assert.deepEqual(document.paths['/open'].post.security, [])
  })

  test('response and request shapes come from the contracts and validators, in the envelope', async ({
    assert,
  }) => {
    const { doc } = await fetchDocument()

    const health = doc.paths['/health'].get
    assert.equal(health.summary, 'Service health')
    assert.include(health.description, 'migrations')
    const ok = health.responses['200'].content['application/json']
    assert.deepEqual(ok.schema.properties.success, { const: true })
    assert.equal(ok.schema.properties.data.type, 'object')
    assert.equal(ok.schema.properties.data.properties.status.type, 'string')
    assert.equal(ok.schema.properties.data.properties.uptimeSecs.type, 'integer')
    const unavailable = health.responses['503'].content['application/json'].schema
    assert.equal(unavailable.allOf[0].$ref, '#/components/schemas/ErrorEnvelope')
    assert.deepEqual(unavailable.properties.code.enum, ['SERVER_ERROR'])

    const envelope = doc.components.schemas.ErrorEnvelope
    assert.sameMembers(envelope.required, ['success', 'error', 'code'])
    assert.includeMembers(envelope.properties.code.enum, [
      'VALIDATION_ERROR',
      'AUTH_REQUIRED',
      'NOT_FOUND',
      'SERVER_ERROR',
    ])
    for (const operations of Object.values<Doc>(doc.paths)) {
      for (const op of Object.values<Doc>(operations)) {
        assert.equal(op.responses.default.$ref, '#/components/responses/Error')
      }
    }

    const register = doc.paths['/auth/register']?.post
    if (register) {
      const body = deref(doc, register.requestBody.content['application/json'].schema)
      assert.includeMembers(Object.keys(body.properties), ['email', 'username', 'password'])
    }
  })

  test('an upload is a multipart/form-data body: POST /agents/import names its archive field', async ({
    assert,
  }) => {
    const { doc } = await fetchDocument()
    const upload = doc.paths['/agents/import'].post.requestBody
    assert.isTrue(upload.required)
    assert.deepEqual(Object.keys(upload.content), ['multipart/form-data'])
    const schema = upload.content['multipart/form-data'].schema
    assert.deepEqual(schema.required, ['archive'])
    assert.include(schema.properties.archive, {
      type: 'string',
      format: 'binary',
      contentMediaType: 'application/gzip',
    })
    // Its refusals: a missing or bad archive (400), one over the size limit.
    const responses = doc.paths['/agents/import'].post.responses
    assert.property(responses, '400')
    assert.property(responses, '413')
  })

  test('the document is built once and then served from cache', async ({ assert }) => {
    const first = openApiService.document()
    assert.strictEqual(openApiService.document(), first)
    const response = await fetch(`${baseUrl()}/openapi.json`)
    const served = await response.text()
    assert.equal(served, await first)
  })

  test('GET /docs answers the explorer page with its files served locally', async ({ assert }) => {
    const page = await fetch(`${baseUrl()}/docs`)
    assert.equal(page.status, 200)
    assert.include(page.headers.get('content-type') ?? '', 'text/html')
    const html = await page.text()
    assert.include(html, 'SwaggerUIBundle')
    assert.include(html, "url: '/openapi.json'")

    const bundle = await fetch(`${baseUrl()}/docs/assets/swagger-ui-bundle.js`)
    assert.equal(bundle.status, 200)
    assert.include(bundle.headers.get('content-type') ?? '', 'javascript')
    const script = await bundle.text()
    assert.isAbove(script.length, 100_000)

    const missing = await fetch(`${baseUrl()}/docs/assets/..%2Fpackage.json`)
    assert.equal(missing.status, 404)
    assert.deepInclude(await missing.json(), { success: false, code: 'NOT_FOUND' })
  })
})

test.group('OpenAPI document from route contracts', () => {
  test('every documented route has a contract, and every contract a live route', async ({
    assert,
  }) => {
    const documented = new Set(
      openApiService.documentedRoutes().map((route) => route.name ?? route.pattern)
    )
    const contracts = new Set(apiContracts.names())
    assert.deepEqual([...documented].filter((name) => !contracts.has(name)).sort(), [])
    assert.deepEqual([...contracts].filter((name) => !documented.has(name)).sort(), [])
  })

  test('a contract becomes an operation: validator body, query, shapes, failures', async ({
    assert,
  }) => {
    const route = {
      pattern: '/samples/:id',
      methods: ['POST'],
      domain: 'root',
      meta: {},
      name: 'samples.store',
      handler: () => ({}),
      matchers: { id: { match: /^[0-9]+$/ } },
      middleware: { all: () => new Set([{ name: 'auth' }]) },
    } as unknown as RouteJSON
    const contracts = defineContracts({
      'samples.store': {
        summary: 'Create a sample',
        description: 'Makes one sample from a name and tags.',
        body: vine.create({
          name: vine.string().trim().minLength(2).maxLength(10),
          tags: vine.array(vine.string()).optional(),
          notes: vine.string().maxLength(50).optional(),
        }),
        query: vine.create({ dryRun: vine.boolean().optional() }),
        responses: {
          201: t.object({ id: t.uuid(), tags: t.array(t.string()), note: t.nullable(t.string()) }),
        },
        errors: [NotFoundException, GoneException],
      },
    })
    const { document, warnings } = await new DocumentBuilder({
      routes: [route],
      contractOf: (name) => contracts[name as keyof typeof contracts],
      info: { title: 't', version: '1' },
      errorCodes: ['VALIDATION_ERROR', 'NOT_FOUND', 'GONE', 'AUTH_REQUIRED'],
    }).build()
    assert.deepEqual(warnings, [])

    const op = document.paths['/samples/{id}'].post
    assert.equal(op.summary, 'Create a sample')
    assert.equal(op.description, 'Makes one sample from a name and tags.')
    assert.equal(op.operationId, 'samples.store')
    assert.deepEqual(op.security, [{ bearerAuth: [] }])
    // The route's matcher is the path parameter's pattern.
    assert.deepInclude(op.parameters, {
      in: 'path',
      name: 'id',
      required: true,
      schema: { type: 'string', pattern: '^[0-9]+$' },
    })
    const dryRun = op.parameters.find((p: Doc) => p.name === 'dryRun')
    assert.equal(dryRun.in, 'query')
    assert.isFalse(dryRun.required)

    const body = op.requestBody.content['application/json'].schema
    assert.isTrue(op.requestBody.required)
    assert.deepEqual(body.required, ['name'])
    // VineJS drops unknown properties rather than refusing them: any gated JSON may stand there.
    assert.deepEqual(body.additionalProperties, { $ref: '#/components/schemas/GatedJsonValue' })
    assert.property(document.components.schemas, 'GatedJsonValue')
    // VineJS reads null as absent: an optional field may be null.
    assert.deepEqual(body.properties.notes.type, ['string', 'null'])
    // Trimmed: the lengths are those of the text inside the whitespace; no control characters.
    assert.notProperty(body.properties.name, 'minLength')
    const name = new RegExp(body.properties.name.pattern)
    for (const accepted of ['ab', '  ab  ', 'a b', 'abcdefghij']) assert.match(accepted, name)
    for (const refused of ['a', '  a  ', 'abcdefghijk', 'a\u0000b']) assert.notMatch(refused, name)
    // Free text keeps its lengths and allows line breaks, not other control characters.
    assert.equal(body.properties.notes.maxLength, 50)
    assert.match('line\nbreak', new RegExp(body.properties.notes.pattern))
    assert.notMatch('bell\u0007', new RegExp(body.properties.notes.pattern))

    const created = op.responses['201'].content['application/json'].schema
    assert.deepEqual(created.properties.success, { const: true })
    assert.sameMembers(created.properties.data.required, ['id', 'tags', 'note'])
    assert.deepEqual(created.properties.data.properties.note, { type: ['string', 'null'] })

    const codes = (status: string) =>
      op.responses[status].content['application/json'].schema.properties.code.enum
    assert.deepEqual(codes('400'), ['VALIDATION_ERROR'])
    assert.deepEqual(codes('401'), ['AUTH_REQUIRED'])
    assert.deepEqual(codes('404'), ['NOT_FOUND'])
    assert.deepEqual(codes('410'), ['GONE'])
    assert.deepEqual(codes('413'), ['VALIDATION_ERROR'])

    const result = await new Validator().validate(document)
    assert.isTrue(result.valid, JSON.stringify(result.errors, null, 2))
  })

  test('a retired route is deprecated and answers only 410 GONE', async ({ assert }) => {
    const { doc } = await fetchDocument()
    const retired = doc.paths['/features/subscribe-with-credits'].post
    assert.isTrue(retired.deprecated)
    assert.sameMembers(Object.keys(retired.responses), ['410', 'default'])
  })

  test('fields that may be null are nullable in the documented success answer', async ({
    assert,
  }) => {
    const { doc } = await fetchDocument()
    const response = doc.paths['/referrals/validate/{code}'].get.responses['200']
    const schema = deref(doc, response.content['application/json'].schema)
    const data = deref(doc, schema.properties.data)
    assert.deepEqual(data.properties.referrerUsername.type, ['string', 'null'])
    assert.equal(data.properties.valid.type, 'boolean', 'other fields keep their type')
  })
})
