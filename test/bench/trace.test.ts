import assert from 'node:assert/strict';
import { test } from 'node:test';

import { PHASES } from '#bench/results.js';
import { COUNTER_NAME, traceOf, type TraceEvent } from '#bench/trace.js';
import { benchFixture } from './support/fixture.js';
import { syntheticResults } from './support/synthetic-results.js';

const fixture = benchFixture();
const METADATA = ['process_name', 'process_sort_index', 'thread_name', 'thread_sort_index'];

/** The fields the Trace Event format requires of each event type used here, with their JSON types. */
function checkEvent(event: TraceEvent, at: string): void {
  assert.equal(typeof event.name, 'string', `${at}: name`);
  assert.ok(['X', 'C', 'M'].includes(event.ph), `${at}: ph ${event.ph}`);
  assert.ok(Number.isInteger(event.pid) && event.pid > 0, `${at}: pid ${event.pid}`);
  assert.ok(Number.isInteger(event.tid) && event.tid >= 0, `${at}: tid ${event.tid}`);
  assert.ok(Number.isFinite(event.ts) && event.ts >= 0, `${at}: ts ${event.ts}`);
  assert.equal(typeof event.args, 'object', `${at}: args`);
  if (event.ph === 'X') {
    assert.ok(Number.isFinite(event.dur) && event.dur! >= 0, `${at}: dur ${event.dur}`);
    assert.ok(event.tid > 0, `${at}: a complete event is on a stream's thread row`);
  }
  if (event.ph === 'C') assert.ok(Object.values(event.args).every((v) => Number.isInteger(v) && (v as number) >= 0), `${at}: counter values`);
  if (event.ph === 'M') assert.ok(METADATA.includes(event.name), `${at}: metadata ${event.name}`);
}

test(`the trace has the Trace Event format's fields, names every row, and the expected event count (${fixture.origin} fixture)`, () => {
  const trace = JSON.parse(JSON.stringify(traceOf(fixture.result))) as ReturnType<typeof traceOf>;
  assert.ok(Array.isArray(trace.traceEvents));
  assert.equal(trace.displayTimeUnit, 'ms');
  trace.traceEvents.forEach((event, i) => checkEvent(event, `traceEvents[${i}]`));

  const byType = (ph: string, name?: string) => trace.traceEvents.filter((e) => e.ph === ph && (name === undefined || e.name === name));
  let complete = 0;
  let rows = 0;
  let counters = 0;
  for (const mode of fixture.result.modes) {
    const tasks = mode.lastRunTasks ?? [];
    if (tasks.length === 0) continue;
    complete += tasks.length * PHASES.length;
    rows += new Set(tasks.map((t) => (mode.mode === 'per-thread' ? `${t.streamId}/${t.thread}` : t.streamId))).size;
    counters += new Set(tasks.flatMap((t) => t.marksMs)).size;
  }
  const modes = fixture.result.modes.filter((m) => m.lastRunTasks?.length).length;
  assert.equal(byType('X').length, complete, 'one complete event per task phase');
  assert.equal(byType('C').length, counters, 'one counter event per distinct phase start or end time of each mode');
  assert.equal(byType('M', 'process_name').length, modes);
  assert.equal(byType('M', 'thread_name').length, rows);
  assert.equal(trace.traceEvents.length, complete + counters + 2 * modes + 2 * rows);

  const processNames = new Map(byType('M', 'process_name').map((e) => [e.pid, e.args.name]));
  const threadNames = new Map(byType('M', 'thread_name').map((e) => [e.tid, e.args.name]));
  assert.deepEqual([...processNames.values()], fixture.result.modes.filter((m) => m.lastRunTasks?.length).map((m) => m.mode));
  assert.equal(threadNames.size, rows, 'thread ids are unique over the file');
  for (const event of byType('X')) {
    assert.ok(threadNames.has(event.tid), `tid ${event.tid} is named`);
    assert.ok(processNames.has(event.pid), `pid ${event.pid} is named`);
  }
});

test('each complete event carries its task, phase and stream, in µs from the run origin', () => {
  const result = syntheticResults({ tasks: 3, modes: ['pool'] });
  const task = result.modes[0]!.lastRunTasks![1]!;
  const events = traceOf(result).traceEvents.filter((e) => e.ph === 'X' && e.args.task === task.task);
  assert.deepEqual(
    events.map((e) => [e.name, e.args.phase, e.args.stream, e.ts, e.dur]),
    PHASES.map((phase, p) => [
      phase,
      phase,
      task.streamId,
      Math.round(task.marksMs[p]! * 1e6) / 1e3,
      Math.round(task.marksMs[p + 1]! * 1e6) / 1e3 - Math.round(task.marksMs[p]! * 1e6) / 1e3,
    ]),
  );
});

test('the counter gives the phases in flight after each change', () => {
  const result = syntheticResults({ tasks: 2, modes: ['per-task'] });
  const [a, b] = result.modes[0]!.lastRunTasks!;
  // Two tasks on their own streams: at b's copy-in start, a's later phases may or may not have started; count directly.
  const at = b!.marksMs[0];
  const inFlight = (p: number) => [a!, b!].filter((t) => t.marksMs[p]! <= at && at < t.marksMs[p + 1]!).length;
  const counter = traceOf(result).traceEvents.find((e) => e.ph === 'C' && e.ts === Math.round(at * 1e6) / 1e3);
  assert.ok(counter, 'a counter event at the second copy-in start');
  assert.equal(counter.name, COUNTER_NAME);
  assert.deepEqual(counter.args, Object.fromEntries(PHASES.map((phase, p) => [phase, inFlight(p)])));
});

test('modes without phase times are left out of the trace', () => {
  const result = syntheticResults({ tasks: 2, modes: ['legacy', 'pool'] });
  result.modes[0]!.lastRunTasks = null;
  const names = traceOf(result).traceEvents.filter((e) => e.name === 'process_name').map((e) => e.args.name);
  assert.deepEqual(names, ['pool']);
});
