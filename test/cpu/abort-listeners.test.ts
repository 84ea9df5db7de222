// The library's waits on one AbortSignal share a single 'abort' listener (src/internal/abort.ts).
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { test } from 'node:test';

import { whenAborted } from '#library/internal/abort.js';

test('whenAborted: one listener for any number of callbacks, run in order; a stopped one is not run', () => {
  const controller = new AbortController();
  const ran: number[] = [];
  const stops = Array.from({ length: 50 }, (_, i) => whenAborted(controller.signal, () => ran.push(i)));
  assert.equal(getEventListeners(controller.signal, 'abort').length, 1);
  stops[3]!();
  stops[3]!(); // again: nothing
  controller.abort();
  assert.deepEqual(ran, Array.from({ length: 50 }, (_, i) => i).filter((i) => i !== 3));
  assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
});

test('whenAborted: the same function added twice runs twice; a callback that throws leaves the others running', () => {
  const controller = new AbortController();
  let count = 0;
  const add = () => count++;
  whenAborted(controller.signal, add);
  whenAborted(controller.signal, () => {
    throw new Error('from a callback');
  });
  whenAborted(controller.signal, add);
  // The error is rethrown from a microtask, as an uncaught exception; caught here before it runs.
  const original = globalThis.queueMicrotask;
  const queued: Array<() => void> = [];
  globalThis.queueMicrotask = (task) => queued.push(task);
  try {
    controller.abort();
  } finally {
    globalThis.queueMicrotask = original;
  }
  assert.equal(count, 2);
  assert.equal(queued.length, 1);
  assert.throws(queued[0]!, /from a callback/);
});
