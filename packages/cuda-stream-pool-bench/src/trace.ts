// The --trace file: a run's task phases in Chrome's Trace Event format (the JSON object form), which Perfetto
// (ui.perfetto.dev) and chrome://tracing open offline. Mapping: one process per mode, one thread row per stream, one
// complete event ("X") per task phase, and per mode a counter ("C") of the copy-ins, kernels and copy-outs in flight.
import { modeTimeline } from './phase-timeline.js';
import { PHASES } from './results.js';
import type { BenchResult } from './schema.js';

/** One event of the Trace Event format: `ph` is its type ("X" complete, "C" counter, "M" metadata), `ts` and `dur`
 * are in µs, `pid` and `tid` place it on a process and a thread row. */
export interface TraceEvent {
  name: string;
  cat?: string;
  ph: 'X' | 'C' | 'M';
  ts: number;
  dur?: number;
  pid: number;
  tid: number;
  args: Record<string, string | number>;
}

/** The whole trace file: the JSON object form of the Trace Event format. */
export interface TraceFile {
  traceEvents: TraceEvent[];
  /** How the viewers show times. */
  displayTimeUnit: 'ms';
  /** Free-form facts about the run, shown by the viewers as metadata. */
  otherData: Record<string, string | number>;
}

/** The name of each mode's counter track. */
export const COUNTER_NAME = 'phases in flight';

/** ms to µs, rounded to the nanosecond (event timestamps carry no more). */
function microseconds(ms: number): number {
  return Math.round(ms * 1e6) / 1e3;
}

/** The trace of every mode that holds phase times (`lastRunTasks`); modes without them are left out.
 * Each mode is a process (pid 1, 2, ... in run order) whose times start at its own run's timing origin; thread ids are
 * unique over the file. */
export function traceOf(result: BenchResult): TraceFile {
  const events: TraceEvent[] = [];
  let tid = 0;
  result.modes.forEach((modeResult, index) => {
    if (!modeResult.lastRunTasks?.length) return;
    const timeline = modeTimeline(modeResult);
    const pid = index + 1;
    events.push({ name: 'process_name', ph: 'M', ts: 0, pid, tid: 0, args: { name: modeResult.mode } });
    events.push({ name: 'process_sort_index', ph: 'M', ts: 0, pid, tid: 0, args: { sort_index: index } });
    timeline.rows.forEach((row, r) => {
      tid++;
      events.push({ name: 'thread_name', ph: 'M', ts: 0, pid, tid, args: { name: row.label } });
      events.push({ name: 'thread_sort_index', ph: 'M', ts: 0, pid, tid, args: { sort_index: r } });
      for (const task of row.tasks) {
        PHASES.forEach((phase, p) => {
          const ts = microseconds(task.marksMs[p]!);
          events.push({
            name: phase,
            cat: 'phase',
            ph: 'X',
            ts,
            dur: Math.max(0, microseconds(task.marksMs[p + 1]!) - ts),
            pid,
            tid,
            args: { task: task.task, phase, stream: row.streamId, thread: task.thread },
          });
        });
      }
    });
    const { timesMs, inFlight } = timeline.steps;
    timesMs.forEach((timeMs, i) => {
      const args: Record<string, number> = {};
      PHASES.forEach((phase, p) => (args[phase] = inFlight[p as 0 | 1 | 2][i]!));
      events.push({ name: COUNTER_NAME, cat: 'occupancy', ph: 'C', ts: microseconds(timeMs), pid, tid: 0, args });
    });
  });
  const e = result.environment;
  return {
    traceEvents: events,
    displayTimeUnit: 'ms',
    otherData: {
      schema: result.schema,
      device: `${e.device.name} (compute ${e.device.computeCapability})`,
      driverVersion: e.driverVersion ?? 'unknown',
      node: e.node,
      date: e.date,
      tasks: result.parameters.tasks,
      concurrency: result.parameters.concurrency,
    },
  };
}

/** The trace of `result` as the text of a Trace Event file (JSON). */
export function traceText(result: BenchResult): string {
  return JSON.stringify(traceOf(result));
}
