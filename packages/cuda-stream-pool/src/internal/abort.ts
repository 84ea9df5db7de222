// The library's waits on a caller's AbortSignal. One signal often covers many waits at once (a request's signal for
// all of its waits and leases); a listener of the library's own per wait made Node.js warn of a listener leak
// (MaxListenersExceededWarning) from the 11th on. So every wait on one signal shares a single 'abort' listener.

const callbacks = new WeakMap<AbortSignal, Set<() => void>>();

/** Calls `onAbort` once when `signal` aborts, unless the returned function was called first (it stops the call; calling
 * it again does nothing). Every callback of the library on one signal is run by one 'abort' listener, in the order they
 * were added; one that throws does not keep the others from running, and its error is rethrown as an uncaught
 * exception, as an event listener's would be. The signal must not have aborted yet (the caller checks
 * `signal.aborted` first: an aborted signal calls no listener). @internal */
export function whenAborted(signal: AbortSignal, onAbort: () => void): () => void {
  let waiting = callbacks.get(signal);
  if (waiting === undefined) {
    const set = new Set<() => void>();
    waiting = set;
    callbacks.set(signal, set);
    signal.addEventListener(
      'abort',
      () => {
        callbacks.delete(signal);
        for (const callback of set) {
          try {
            callback();
          } catch (error) {
            queueMicrotask(() => {
              throw error;
            });
          }
        }
      },
      { once: true },
    );
  }
  // Its own function, so that the same `onAbort` added twice is two entries.
  const entry = (): void => onAbort();
  const set = waiting;
  set.add(entry);
  return () => {
    set.delete(entry);
  };
}
