import type { RuntimeEvent, RuntimeEventListener } from '#runtime/types'

/**
 * Runtime events to their listeners (drivers to the runtime service, the
 * service to the agents area): a listener that throws is reported and
 * never keeps the event from the others.
 */
export class RuntimeEventFanOut {
  readonly #listeners = new Set<RuntimeEventListener>()

  constructor(private readonly onListenerError: (error: Error) => void) {}

  /** Returns the unsubscribe function. */
  onEvent(listener: RuntimeEventListener): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  emit(event: RuntimeEvent) {
    for (const listener of this.#listeners) {
      try {
        listener(event)
      } catch (error) {
        this.onListenerError(error as Error)
      }
    }
  }
}
