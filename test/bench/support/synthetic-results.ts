// A plausible `bench --json --phases` results file made without a GPU, for the timeline tests: a small queueing model
// of the benchmark (a copy-in engine, two kernels at once, a copy-out engine, stream order, a fixed number of tasks
// in flight) with jittered phase lengths. It stands in until test/bench/fixtures/bench-results.json (a real run) exists,
// and makes the 50,000-bar file of the load-time test.
//   node dist/test/support/synthetic-results.js <tasks> [file]   writes one (stdout without a file)
import { writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

import { summarize } from '#bench/harness.js';
import { MODES, type ResultMode } from '#bench/modes.js';
import { generator } from '#bench/reference.js';
import { addSpeedups } from '#bench/results.js';
import { BENCH_SCHEMA, type BenchResult, type ModeResult, type TaskPhaseTimes } from '#bench/schema.js';

/** What to model. */
export interface SyntheticOptions {
  /** Tasks per mode. */
  tasks: number;
  /** @defaultValue every mode this build runs */
  modes?: ResultMode[];
  /** @defaultValue 32 */
  concurrency?: number;
  /** @defaultValue 32 */
  poolSize?: number;
  /** @defaultValue 1 */
  seed?: number;
}

const PHASE_MS = [0.09, 0.085, 0.09];

/** The stream id of task `task` in `mode` (pool streams round-robin; lease takes the stream that frees first). */
function streamOf(mode: ResultMode, task: number, poolSize: number, streamFree: Map<string, number>): string {
  if (mode === 'legacy') return '1';
  if (mode === 'per-thread') return '2';
  if (mode === 'per-task' || mode === 'graph') return String(1000 + task);
  if (mode === 'lease') {
    let best = '';
    for (let s = 0; s < poolSize; s++) {
      const id = String(100 + s);
      if (best === '' || (streamFree.get(id) ?? 0) < (streamFree.get(best) ?? 0)) best = id;
    }
    return best;
  }
  return String(100 + (task % poolSize));
}

function simulate(mode: ResultMode, o: Required<SyntheticOptions>, random: () => number): { tasks: TaskPhaseTimes[]; wallMs: number } {
  const jitter = (ms: number) => ms * (0.85 + 0.3 * random());
  const engines = [[0], [0, 0], [0]]; // free times: one copy-in engine, two kernels at once, one copy-out engine
  const streamFree = new Map<string, number>();
  const ends: number[] = [];
  const tasks: TaskPhaseTimes[] = [];
  const hostMs = mode === 'native' ? 0.004 : 0.02;
  for (let task = 0; task < o.tasks; task++) {
    const issued = task < o.concurrency ? task * hostMs : ends[task - o.concurrency]! + hostMs;
    const streamId = streamOf(mode, task, o.poolSize, streamFree);
    const marks: number[] = [Math.max(issued, streamFree.get(streamId) ?? 0)];
    // A phase starts (its event) when the previous one ends, and runs once its engine is free: like the benchmark's
    // events, a phase's bar includes its wait for the engine.
    for (let p = 0; p < 3; p++) {
      const engine = engines[p]!;
      const slot = engine.indexOf(Math.min(...engine));
      const end = Math.max(marks[p]!, engine[slot]!) + jitter(PHASE_MS[p]!);
      engine[slot] = end;
      marks.push(end);
    }
    streamFree.set(streamId, marks[3]!);
    ends.push(marks[3]!);
    tasks.push({ task, thread: 0, streamId, marksMs: marks.map((m) => Math.round(m * 1e6) / 1e6) as TaskPhaseTimes['marksMs'] });
  }
  return { tasks, wallMs: ends.reduce((a, b) => Math.max(a, b), 0) + 0.05 };
}

/** A results file of schema `cuda-stream-pool/bench/2` with phase times for every mode, from the model above. */
export function syntheticResults(options: SyntheticOptions): BenchResult {
  const o: Required<SyntheticOptions> = { modes: [...MODES], concurrency: 32, poolSize: 32, seed: 1, ...options };
  const random = generator(o.seed);
  const elements = 262_144;
  const modes: ModeResult[] = o.modes.map((mode) => {
    const { tasks, wallMs } = simulate(mode, o, random);
    const tasksPerSecond = summarize([o.tasks / (wallMs / 1000)]);
    return {
      mode,
      wallMs: [wallMs],
      tasksPerSecond,
      gigabytesPerSecond: summarize([(2 * o.tasks * elements * 4) / (wallMs / 1000) / 1e9]),
      latencyMs: { p50: 0.4, p99: 0.9 },
      speedupOverLegacy: null,
      speedupOverNative: null,
      overlapFraction: summarize([(o.tasks * Math.max(...PHASE_MS)) / wallMs]),
      verifiedTasks: o.tasks,
      streams: new Set(tasks.map((t) => t.streamId)).size,
      lastRunTasks: tasks,
    };
  });
  addSpeedups(modes);
  return {
    schema: BENCH_SCHEMA,
    environment: {
      date: '2026-12-01T00:00:00.000Z',
      packageVersion: '0.1.0',
      libraryVersion: '0.1.0',
      node: process.version,
      os: 'synthetic',
      cpu: 'synthetic',
      driverVersion: '13.0',
      device: {
        ordinal: 0,
        name: 'Synthetic GPU (a model, not a measurement)',
        computeCapability: '9.0',
        multiprocessorCount: 132,
        totalMemoryBytes: 150_000_000_000,
        asyncEngineCount: 3,
      },
    },
    parameters: {
      tasks: o.tasks,
      concurrency: o.concurrency,
      workers: 0,
      elements,
      partitionBytes: elements * 4,
      intensity: 100,
      intensityCalibrated: true,
      modes: o.modes,
      poolSize: o.poolSize,
      runs: 1,
      warmupTasks: 2 * o.concurrency,
      partitions: Math.min(o.tasks, 8),
      sampleSize: 256,
      ulpTolerance: 4,
      fma: { a: 0.999, b: 0.001 },
      phaseTimes: true,
    },
    phasesAloneMs: { copyIn: PHASE_MS[0]!, kernel: PHASE_MS[1]!, copyOut: PHASE_MS[2]! },
    overlapBoundMs: o.tasks * Math.max(...PHASE_MS),
    modes,
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const tasks = Number(process.argv[2] ?? 64);
  const text = `${JSON.stringify(syntheticResults({ tasks }), null, 2)}\n`;
  if (process.argv[3]) writeFileSync(process.argv[3], text);
  else process.stdout.write(text);
}
