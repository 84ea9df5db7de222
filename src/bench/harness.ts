// Timing helpers shared by every benchmark: per-call costs as a median and spread over several runs, and the
// result rows that `cuda-stream-pool bench micro` prints beside their native baselines.

/** One timed quantity: the median and the 10th/90th percentiles over `runs` runs. */
export interface Sample {
  median: number;
  p10: number;
  p90: number;
  runs: number;
}

/** A micro-benchmark row: what was measured, its value, and the baseline from the same run it is compared with. */
export interface MicroResult {
  /** What one call does, for example 'pool.getStream()'. */
  name: string;
  /** The unit of `value` and `baseline`: 'ns' per call, 'µs' per call, 'ms' in all, 'GB/s', or '%' of one CPU core. */
  unit: 'ns' | 'µs' | 'ms' | 'GB/s' | '%';
  value: Sample;
  /** The baseline's name, for example 'cuStreamCreate+cuStreamDestroy (C++ loop)'. */
  baselineName?: string;
  baseline?: Sample;
  /** value / baseline for costs (lower is better), baseline / value inverted for throughput; see `better`. */
  ratio?: number;
  /** Whether a ratio below 1 ('lower') or above 1 ('higher') is better. */
  better?: 'lower' | 'higher';
  /** The target in words, for example '≤ 50 ns and ≥ 80× cheaper than create+destroy'. */
  target?: string;
  /** Whether the target was met, when there is one. */
  met?: boolean;
}

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

/** Nanoseconds per call of a synchronous `fn`, over `runs` runs of `iterations` calls each, after one warm-up run. */
export function timeSync(fn: (i: number) => unknown, iterations: number, runs = 9): Sample {
  const perCall: number[] = [];
  for (let r = -1; r < runs; r++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < iterations; i++) fn(i);
    const ns = Number(process.hrtime.bigint() - start) / iterations;
    if (r >= 0) perCall.push(ns);
  }
  return summarize(perCall);
}

/** `result` (a cost beside its baseline) with the target "at most `factor` × the baseline" and whether it was met. */
export function targetRatio(result: MicroResult, factor: number): MicroResult {
  result.target = `≤ ${factor}× the baseline`;
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

/** A native baseline's sample: `measure` (one run of a C++ loop, returning its figure) called `runs` times after one
 * warm-up call, as {@link timeSync} runs a JS loop. */
export function nativeSample(measure: () => number, runs = 9): Sample {
  const values: number[] = [];
  for (let r = -1; r < runs; r++) {
    const value = measure();
    if (r >= 0) values.push(value);
  }
  return summarize(values);
}

/** Nanoseconds per call of an async `fn` awaited in sequence, as {@link timeSync}. */
export async function timeAsync(fn: (i: number) => Promise<unknown>, iterations: number, runs = 9): Promise<Sample> {
  const perCall: number[] = [];
  for (let r = -1; r < runs; r++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < iterations; i++) await fn(i);
    const ns = Number(process.hrtime.bigint() - start) / iterations;
    if (r >= 0) perCall.push(ns);
  }
  return summarize(perCall);
}
