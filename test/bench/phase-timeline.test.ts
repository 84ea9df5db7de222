import assert from 'node:assert/strict';
import { test } from 'node:test';

import { modeTimeline } from '#bench/phase-timeline.js';
import type { ModeResult, TaskPhaseTimes } from '#bench/schema.js';
import { syntheticResults } from './support/synthetic-results.js';

/** A pool mode row whose last run is `tasks`. */
function modeWith(tasks: TaskPhaseTimes[], mode: ModeResult['mode'] = 'pool'): ModeResult {
  const row = syntheticResults({ tasks: 1, modes: [mode] }).modes[0]!;
  return { ...row, lastRunTasks: tasks };
}

test('occupancy counts the busy time, the mean and peak in flight, and the idle gaps of each engine', () => {
  // Two tasks on two streams, offset by half a phase; the second copy-out is longer.
  const timeline = modeTimeline(
    modeWith([
      { task: 0, thread: 0, streamId: '10', marksMs: [0, 1, 2, 3] },
      { task: 1, thread: 0, streamId: '11', marksMs: [0.5, 1.5, 2.5, 4] },
    ]),
  );
  assert.equal(timeline.spanStartMs, 0);
  assert.equal(timeline.spanEndMs, 4);
  const summary = timeline.occupancy.map((o) => [o.phase, o.busyMs, o.busyFraction, o.meanInFlight, o.peakInFlight, o.gaps, o.idleMs]);
  assert.deepEqual(summary, [
    ['copy-in', 1.5, 0.375, 0.5, 2, 1, 2.5], // busy 0 to 1.5, idle 1.5 to 4
    ['kernel', 1.5, 0.375, 0.5, 2, 2, 2.5], // idle 0 to 1 and 2.5 to 4
    ['copy-out', 2, 0.5, 0.625, 2, 1, 2], // idle 0 to 2
  ]);
  assert.deepEqual(timeline.steps.timesMs, [0, 0.5, 1, 1.5, 2, 2.5, 3, 4]);
  assert.deepEqual(timeline.steps.inFlight[1], [0, 0, 1, 2, 1, 0, 0, 0]);
});

test('a phase ending when the next one starts leaves no gap, and rows come in start order with their busy fraction', () => {
  const timeline = modeWith([
    { task: 0, thread: 0, streamId: '20', marksMs: [1, 2, 3, 4] },
    { task: 1, thread: 0, streamId: '10', marksMs: [0, 1, 2, 3] },
    { task: 2, thread: 0, streamId: '10', marksMs: [3, 4, 5, 6] },
  ]);
  const result = modeTimeline(timeline);
  // copy-in runs 0 to 1 then 1 to 2 (one stretch), idles 2 to 3 and 4 to 6; kernel idles 0 to 1, 3 to 4 and 5 to 6;
  // copy-out idles 0 to 2 and 4 to 5.
  assert.deepEqual(result.occupancy.map((o) => [o.busyMs, o.gaps]), [[3, 2], [3, 3], [3, 2]]);
  assert.deepEqual(result.rows.map((r) => [r.streamId, r.busyFraction, r.tasks.map((t) => t.task)]), [
    ['10', 1, [1, 2]],
    ['20', 0.5, [0]],
  ]);
});

test('per-thread rows keep the streams of different threads apart, even with one id', () => {
  const timeline = modeTimeline(
    modeWith(
      [
        { task: 0, thread: 1, streamId: '2', marksMs: [0, 1, 2, 3] },
        { task: 1, thread: 2, streamId: '2', marksMs: [0, 1, 2, 3] },
      ],
      'per-thread',
    ),
  );
  assert.deepEqual(timeline.rows.map((r) => r.label), ["worker 1's stream (id 2)", "worker 2's stream (id 2)"]);
});

test('a mode without phase times is refused with a RangeError naming it', () => {
  assert.throws(() => modeTimeline({ ...modeWith([]), lastRunTasks: null }), { name: 'RangeError', message: /mode pool holds no phase times \(lastRunTasks is null\)/ });
});

test('a run of 150,000 tasks gets its timeline and trace: no step spreads every task as call arguments', async () => {
  const { traceText } = await import('#bench/trace.js');
  const result = syntheticResults({ tasks: 150_000, modes: ['pool'] });
  const tasks = result.modes[0]!.lastRunTasks!;
  const timeline = modeTimeline(result.modes[0]!);
  let first = Infinity;
  let last = -Infinity;
  for (const task of tasks) {
    first = Math.min(first, task.marksMs[0]);
    last = Math.max(last, task.marksMs[3]);
  }
  assert.equal(timeline.spanStartMs, first);
  assert.equal(timeline.spanEndMs, last);
  assert.equal(timeline.rows.reduce((sum, row) => sum + row.tasks.length, 0), 150_000);
  assert.ok(traceText(result).length > 0);
});
