/*
|--------------------------------------------------------------------------
| Routes
|--------------------------------------------------------------------------
|
| Each area of the spec keeps its routes next to its controllers in
| app/<area>/routes.ts; this file only pulls them in, the core's own
| (landing, health, OpenAPI, the test-only routes) last. Routes files only
| declare routes: what an area registers at start-up is in the other
| preload files (start/jobs.ts, start/export_sections.ts, start/transmit.ts,
| start/view.ts, start/knowledge.ts).
|
| Each file is awaited in turn, so routes are registered in exactly this
| order, which is the order /openapi.json and the docs explorer list them in
| (with plain imports, a routes file whose imports wait on a top-level await
| would register after the others, whatever its place in the list).
|
*/
await import('#credits/routes')
await import('#referrals/routes')
await import('#skills/routes')
await import('#knowledge/routes')
await import('#tools/routes')
await import('#channels/routes')
await import('#schedules/routes')
await import('#backups/routes')
await import('#support/routes')
await import('#billing/routes')
await import('#console/routes')
await import('#identity/routes')
await import('#chat/routes')
await import('#agents/routes')
await import('#core/routes')
