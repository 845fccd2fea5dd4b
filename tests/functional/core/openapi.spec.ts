import { test } from '@japa/runner'
import router from '@adonisjs/core/services/router'
import type { RouteJSON } from '@adonisjs/core/types/http'
import { Validator } from '@seriousme/openapi-schema-validator'
import { baseUrl } from '#tests/helpers/http'
import openApiService, { isExcluded } from '#core/openapi/openapi_service'
import { runAutoswagger } from '#core/openapi/autoswagger_engine'
import { DocumentBuilder } from '#core/openapi/document_builder'
import { validatorUsedBy } from '#core/openapi/controller_source'
import { CREDENTIAL_REQUIRED } from '#core/openapi/route_security'

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
    const engine = await runAutoswagger({
      routes,
      sourceRoot: null,
      runtimeRoot: openApiService.sourceRoot()!,
      ignore: [],
      info: { title: 't', version: '1' },
    })
    const { document } = new DocumentBuilder({
      routes,
      engine,
      info: { title: 't', version: '1' },
      errorCodes: ['AUTH_REQUIRED'],
      responseOverrides: {},
    }).build()

    assert.deepEqual(document.paths['/things/{id}'].delete.security, [{ bearerAuth: [] }])
    assert.equal(
      document.paths['/things/{id}'].delete.responses['401'].content['application/json'].schema
        .$ref,
      '#/components/schemas/ErrorEnvelope'
    )
    assert.deepEqual(document.paths['/things/by-name/{name}'].get.security, [
      {},
      { bearerAuth: [] },
    ])
    assert.deepEqual(document.paths['/open'].post.security, [])
  })

  test('response and request shapes come from annotations and validators, in the envelope', async ({
    assert,
  }) => {
    const { doc } = await fetchDocument()

    const health = doc.paths['/health'].get
    assert.equal(health.summary, 'Service health')
    assert.include(health.description, 'migrations')
    const ok = health.responses['200'].content['application/json']
    assert.deepEqual(ok.schema.properties.success, { type: 'boolean', example: true })
    assert.equal(ok.schema.properties.data.type, 'object')
    assert.equal(ok.schema.properties.data.properties.status.type, 'string')
    assert.equal(ok.schema.properties.data.properties.uptimeSecs.type, 'integer')
    assert.equal(
      health.responses['503'].content['application/json'].schema.$ref,
      '#/components/schemas/ErrorEnvelope'
    )

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

test.group('OpenAPI generation from controller sources', () => {
  test('JSDoc without the @method line is still read; JSON examples become valid schemas', async ({
    assert,
  }) => {
    const SampleController = () => import('#tests/fixtures/openapi/sample_controller')
    const route = {
      pattern: '/samples',
      methods: ['POST'],
      domain: 'root',
      meta: {},
      name: 'samples.store',
      handler: {
        method: 'store',
        reference: [SampleController, 'store'],
        name: 'SampleController',
      },
      middleware: { all: () => new Set([{ name: 'auth' }]) },
    } as unknown as RouteJSON
    const engine = await runAutoswagger({
      routes: [route],
      sourceRoot: openApiService.sourceRoot(),
      runtimeRoot: openApiService.sourceRoot()!,
      ignore: [],
      info: { title: 't', version: '1' },
    })
    const { document } = new DocumentBuilder({
      routes: [route],
      engine,
      info: { title: 't', version: '1' },
      errorCodes: ['VALIDATION_ERROR'],
      responseOverrides: {},
    }).build()

    const op = document.paths['/samples'].post
    assert.equal(op.summary, 'Create a sample')
    assert.equal(op.description, 'Makes one sample from a name and tags.')
    assert.deepEqual(op.security, [{ bearerAuth: [] }])

    const body = op.requestBody.content['application/json'].schema
    assert.equal(body.properties.name.type, 'string')
    assert.deepEqual(body.properties.tags, {
      type: 'array',
      items: { type: 'string', example: 'x' },
    })
    assert.equal(body.properties.nested.properties.n.type, 'integer')

    const created = op.responses['201'].content['application/json']
    assert.deepEqual(created.schema.properties.success, { type: 'boolean', const: true })
    assert.equal(created.schema.properties.data.properties.id.format, 'uuid')
    assert.deepEqual(created.example, {
      success: true,
      data: { id: '5f0c6b8e-3a7c-4c1e-9f7a-2b1d3c4e5f60', tags: ['x'] },
    })
    assert.isTrue(engine.warnings.some((w) => w.includes('@responseBody 204')))

    const result = await new Validator().validate(document)
    assert.isTrue(result.valid, JSON.stringify(result.errors, null, 2))
  })

  test('the validator a handler passes to validateUsing is found in its source', ({ assert }) => {
    const source = `
export default class AgentsController {
  async index({ request }: HttpContext) {
    const query = await request.validateUsing(listAgentsValidator)
    return query
  }

  async store({ request }: HttpContext) {
    const { name } = { name: '}' }
    const payload = await request.validateUsing(createAgentValidator, { meta: {} })
    return { name, payload }
  }
}`
    assert.equal(validatorUsedBy(source, 'index'), 'listAgentsValidator')
    assert.equal(validatorUsedBy(source, 'store'), 'createAgentValidator')
    assert.isNull(validatorUsedBy(source, 'destroy'))
  })

  test('fields marked @nullable may be null in the documented success answer', async ({
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
