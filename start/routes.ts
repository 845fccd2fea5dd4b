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
*/
import '#identity/routes'
import '#credits/routes'
import '#support/routes'
import '#billing/routes'
import '#referrals/routes'
import '#chat/routes'
import '#agents/routes'
import '#skills/routes'
import '#schedules/routes'
import '#knowledge/routes'
import '#tools/routes'
import '#channels/routes'
import '#console/routes'
import '#core/routes'
