/*
|--------------------------------------------------------------------------
| Transmit channels
|--------------------------------------------------------------------------
|
| The console's live updates: who may subscribe to which channel, and what
| is broadcast on it. Transmit's own routes are declared in
| app/console/routes.ts.
|
*/
import { registerLiveUpdates } from '#console/services/live_updates'

registerLiveUpdates()
