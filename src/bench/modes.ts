// The executor benchmark's modes: the names, what each means, and which need the pool. Plain data with no import of
// the GPU API, so that the CLI can validate --mode before anything touches the GPU. The streams themselves are picked
// in mode-stream.ts.

/** The modes in the order they run and print. */
export const MODES = ['native', 'legacy', 'per-thread', 'per-task', 'pool', 'lease'] as const;

/** One way of giving a task its stream. */
export type Mode = (typeof MODES)[number];

/** Every mode a results file can hold: the modes above, and `graph` (each task one CUDA graph launch). */
export type ResultMode = Mode | 'graph';

/** What each mode means, for `--help`, the report's notes, the timeline and the README. */
export const MODE_DESCRIPTIONS: Record<ResultMode, string> = {
  native: 'the baseline: C++ threads of the benchmark addon, one per slot, each on a stream of its own, waiting with cuStreamSynchronize',
  legacy: 'every task on the legacy default stream (tasks serialize)',
  'per-thread': "every task on its thread's per-thread default stream (one stream per thread)",
  'per-task': 'a stream created for each task and destroyed after it (Stream.create / destroy)',
  pool: 'pool.getStream(): shared pool streams handed out round-robin',
  lease: 'pool.run(): an exclusive lease on a pool stream per task, released when the task ends',
  graph: 'each task one CUDA graph launch',
};

/** Whether the mode needs the shared pool. */
export function usesPool(mode: Mode): boolean {
  return mode === 'pool' || mode === 'lease';
}
