/**
 * Stands for a resource a test group makes in its setup (a browser, a
 * stand-in upstream), so that the group's tests can name it as a constant:
 * each property read goes to the resource `current()` answers then.
 */
export function lateBound<T extends object>(current: () => T | undefined, missing: string): T {
  return new Proxy({} as T, {
    get(_, key) {
      const resource = current()
      if (!resource) throw new Error(missing)
      const value = Reflect.get(resource, key)
      return typeof value === 'function' ? value.bind(resource) : value
    },
  })
}
