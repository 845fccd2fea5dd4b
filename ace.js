/*
|--------------------------------------------------------------------------
| JavaScript entrypoint for running ace commands
|--------------------------------------------------------------------------
|
| Registers the TypeScript JIT (ts-exec) and hands over to bin/console.ts.
| In a production build this file is replaced by a plain JS entrypoint.
|
*/
import '@poppinss/ts-exec'

await import('./bin/console.js')
