/*
|--------------------------------------------------------------------------
| Edge globals
|--------------------------------------------------------------------------
|
| The helpers the console's templates share (times, audit changes).
|
*/
import '#console/services/view_helpers'
