// Timing helpers shared by every benchmark: per-call costs as a median and spread over several runs, and the targets
// of the rows that `cuda-stream-pool bench micro` prints beside their native baselines (the rows' shape: schema.ts).
import { cuda } from 'cuda-stream-pool';

import type { MicroResult, Sample } from './schema.js';

function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN; // nothing measured: shown as '-', never as a figure
  const at = (sorted.length - 1) * q;
  const lo = Math.floor(at);
  const hi = Math.ceil(at);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (at - lo);
}

/** Summarizes values (any unit) as median and 10th/90th percentiles; no values give NaN for each, with 0 runs. */
export function summarize(values: number[]): Sample {
  const sorted = [...values].sort((a, b) => a - b);
  return { median: percentile(sorted, 0.5), p10: percentile(sorted, 0.1), p90: percentile(sorted, 0.9), runs: values.length };
}

/* Note [steady state]: a per-call figure is only worth reading once V8 has optimized the loop that makes the calls;
 * before that it measures the interpreter and the compiler. So every loop of `bench micro` is measured the same way:
 * - warm-up: rounds of WARMUP_RUNS runs, until the median per call of a round is within SETTLED of the round
 *   before, or WARMUP_ROUNDS rounds, or WARMUP_MS, have passed (a loop that never settles is measured anyway). No
 *   round settles, and the rounds are not counted, before the warm-up has made MIN_WARMUP_CALLS calls or run for
 *   MIN_WARMUP_MS (for calls of milliseconds, whose JS part is no matter): V8 optimizes a loop after some thousands of
 *   its iterations, and an interpreted loop of few calls per run (a capped one, below) is steady enough to look
 *   settled. Measured with the null driver: GraphExec.launch() at 200 calls per run cost
 *   1.5-3.7 µs for the first 5,000 calls and 0.25-0.4 µs from there on;
 * - calls per run: from the caller's minimum, grown (at most 16× a step) whenever a round's median run is shorter
 *   than MIN_RUN_MS (the settling then starts again), so that a run is long beside the timer's resolution and the
 *   size holds once the loop is optimized;
 * - then `runs` measured runs at that size, summarized as median and p10-p90, with `callsPerRun` in the sample.
 * A loop that queues GPU work (launches, copies) has a ceiling on its calls per run (`maxCalls`: the stream's queue
 * must not fill, or the call blocks and the figure is the GPU's) and waits for its stream between runs, untimed.
 * A loop is one function given the number of calls, so the loop itself is what V8 optimizes, not a wrapper that
 * calls a closure per call (a loop whose body is a closure pays that call: a few ns). */
const MIN_RUN_MS = 5;
const WARMUP_RUNS = 3;
const WARMUP_ROUNDS = 20;
const WARMUP_MS = 3000;
const MIN_WARMUP_CALLS = 20_000;
const MIN_WARMUP_MS = 250;
const SETTLED = 0.05;
const MAX_CALLS = 2 ** 26;

/** How {@link steadySync} and {@link steadyAsync} size and warm a loop; every field optional. */
export interface SteadyOptions {
  /** Calls in the first run, the least a run makes: a positive integer. @defaultValue 100 */
  minCalls?: number;
  /** Measured runs after the warm-up. @defaultValue 9 */
  runs?: number;
  /** The most calls a run may make, for a loop that queues GPU work: the stream's queue must not fill within a run
   * (a full queue blocks the call, and the figure would be the GPU's). @defaultValue 2 ** 26 */
  maxCalls?: number;
  /** Called before every run, untimed: for a loop that queues work, a wait until the stream is idle again. */
  between?: () => void;
  /** Called after every measured run (not the warm-up's) with its calls, untimed: {@link steadySyncBeside} runs its
   * baseline there. */
  afterRun?: (calls: number) => void;
}

function elapsedNs(start: bigint): number {
  return Number(process.hrtime.bigint() - start);
}

/** The next size of a run that lasted `ns` with `calls` calls: enough for MIN_RUN_MS, at most 16× more. */
function grown(calls: number, ns: number): number {
  const wanted = Math.ceil((calls * MIN_RUN_MS * 1e6 * 1.2) / Math.max(ns, 1));
  return Math.min(MAX_CALLS, Math.max(calls + 1, Math.min(wanted, calls * 16)));
}

function median(values: number[]): number {
  return summarize(values).median;
}

/** The warm-up of Note [steady state] over `run` (one run of `calls` calls, returning its ns), as a generator so that
 * the synchronous and the asynchronous loop share it: it yields each size to run WARMUP_RUNS times and is sent the
 * median of those runs; it returns the calls per measured run. */
function* warmUp(minCalls: number, maxCalls = MAX_CALLS): Generator<number, number, number> {
  let calls = Math.min(Math.max(1, minCalls), maxCalls);
  let previous = Number.NaN;
  let warmUpCalls = 0;
  const start = process.hrtime.bigint();
  for (let round = 0; round < WARMUP_ROUNDS && elapsedNs(start) < WARMUP_MS * 1e6; round++) {
    const ns: number = yield calls;
    warmUpCalls += calls * WARMUP_RUNS;
    if (warmUpCalls < MIN_WARMUP_CALLS && elapsedNs(start) < MIN_WARMUP_MS * 1e6) {
      round--; // too few calls yet for V8 to have optimized the loop
      continue;
    }
    if (ns < MIN_RUN_MS * 1e6 && calls < maxCalls) {
      // Too short (the loop got faster as V8 optimized it): a bigger run, and the settling starts again.
      calls = Math.min(grown(calls, ns), maxCalls);
      previous = Number.NaN;
      continue;
    }
    const perCall = ns / calls;
    if (Math.abs(perCall - previous) <= SETTLED * previous) break;
    previous = perCall;
  }
  return calls;
}

/** Nanoseconds per call of `loop(calls)` (a synchronous loop making `calls` calls) in steady state: see
 * Note [steady state]. The sample carries the calls per run. */
export function steadySync(loop: (calls: number) => unknown, options: SteadyOptions = {}): Sample {
  const run = (calls: number): number => {
    options.between?.();
    const start = process.hrtime.bigint();
    loop(calls);
    return elapsedNs(start);
  };
  const plan = warmUp(options.minCalls ?? 100, options.maxCalls);
  let step = plan.next();
  while (!step.done) {
    const calls = step.value;
    step = plan.next(median(Array.from({ length: WARMUP_RUNS }, () => run(calls))));
  }
  const calls = step.value;
  const perCall = Array.from({ length: options.runs ?? 9 }, () => {
    const ns = run(calls);
    options.afterRun?.(calls);
    return ns / calls;
  });
  return { ...summarize(perCall), callsPerRun: calls };
}

/** {@link steadySync} of `loop` with its native baseline measured in turn with it: after the warm-up, every measured
 * run of `loop` is followed by a run of `baseline(calls)` (a C++ loop of the benchmark's addon making the same number
 * of calls, returning ns per call), `between` before each. Where a driver's calls get cheaper or dearer as a process
 * goes on (creating streams: the C++ loop took 3.3 µs per pair after the library's loop and 4.5 µs before it, on one
 * H100), measuring one after the other would charge the difference to the ratio; in turn, both see the same driver. */
export function steadySyncBeside(loop: (calls: number) => unknown, baseline: (calls: number) => number, options: SteadyOptions = {}): { library: Sample; native: Sample } {
  const native: number[] = [];
  const library = steadySync(loop, {
    ...options,
    afterRun: (calls) => {
      options.between?.();
      native.push(baseline(calls));
    },
  });
  return { library, native: { ...summarize(native), callsPerRun: library.callsPerRun } };
}

/** {@link steadySync} for a loop that awaits: `loop(calls)` resolves once it has made `calls` calls. */
export async function steadyAsync(loop: (calls: number) => Promise<unknown>, options: SteadyOptions = {}): Promise<Sample> {
  const run = async (calls: number): Promise<number> => {
    options.between?.();
    const start = process.hrtime.bigint();
    await loop(calls);
    return elapsedNs(start);
  };
  const plan = warmUp(options.minCalls ?? 100, options.maxCalls);
  let step = plan.next();
  while (!step.done) {
    const times: number[] = [];
    for (let r = 0; r < WARMUP_RUNS; r++) times.push(await run(step.value));
    step = plan.next(median(times));
  }
  const calls = step.value;
  const perCall: number[] = [];
  for (let r = 0; r < (options.runs ?? 9); r++) perCall.push((await run(calls)) / calls);
  return { ...summarize(perCall), callsPerRun: calls };
}

/** `result` (a cost beside its baseline) with the target "at most `factor` × the baseline" and whether it was met;
 * `baseline` names the baseline in the target's text. */
export function targetRatio(result: MicroResult, factor: number, baseline = 'the baseline'): MicroResult {
  result.target = `≤ ${factor}× ${baseline}`;
  result.met = result.value.median <= factor * result.baseline!.median;
  return result;
}

/** `result` (a cost in ns beside its baseline) with the target "at most the baseline + `ns` ns" and whether it was
 * met. */
export function targetAddedNs(result: MicroResult, ns: number): MicroResult {
  result.target = `≤ the baseline + ${ns} ns`;
  result.met = result.value.median <= result.baseline!.median + ns;
  return result;
}

/** What a call that queues work on the library's own stream may cost the JS thread in deferred submission, where it
 * only records the operation for a submission thread. */
export const RECORDING_TARGET_NS = 150;

/** The calls a run of the `event.record` row makes in deferred submission, where it would otherwise make 10,000: under
 * half the submission queue (2,048 operations), so that the run never waits for room, which would time the submission
 * thread's issue rate (its own row) instead of the recording. The other recorded rows' runs are smaller already. */
export const RECORDED_CALLS_PER_RUN = 1_000;

/** `result`, a call that queues work on the library's own stream, with its target: `direct` (against the driver call
 * of its C++ baseline) in direct submission; in deferred submission, where the row times the recording alone while
 * its baseline still makes the driver call, at most {@link RECORDING_TARGET_NS} ns. */
export function targetUnlessRecorded(result: MicroResult, direct: (result: MicroResult) => MicroResult): MicroResult {
  if (cuda.submission().mode !== 'deferred') return direct(result);
  const ns = result.unit === 'µs' ? result.value.median * 1000 : result.value.median;
  result.target = `≤ ${RECORDING_TARGET_NS} ns (deferred: the recording alone; the baseline makes the driver call)`;
  result.met = ns <= RECORDING_TARGET_NS;
  return result;
}

/** A native baseline's sample: `measure` (one run of a C++ loop, returning its figure) called `runs` times after one
 * warm-up call (compiled code needs no more). `calls`, when given, is the loop's calls per run, kept in the sample. */
export function nativeSample(measure: () => number, runs = 9, calls?: number): Sample {
  const values: number[] = [];
  for (let r = -1; r < runs; r++) {
    const value = measure();
    if (r >= 0) values.push(value);
  }
  const sample = summarize(values);
  return calls === undefined ? sample : { ...sample, callsPerRun: calls };
}

/** Nanoseconds per call of an async `fn` awaited in sequence, in steady state as {@link steadyAsync}. */
export async function timeAsync(fn: (i: number) => Promise<unknown>, iterations: number, runs = 9): Promise<Sample> {
  return steadyAsync(async (calls) => {
    for (let i = 0; i < calls; i++) await fn(i);
  }, { minCalls: iterations, runs });
}
