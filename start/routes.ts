/*
|--------------------------------------------------------------------------
| Routes
|--------------------------------------------------------------------------
|
| Each area of the spec keeps its routes next to its controllers in
| app/<area>/routes.ts; this file only pulls them in.
|
*/
import '#core/routes'
