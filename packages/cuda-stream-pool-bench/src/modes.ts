// The executor benchmark's modes: the names, what each means, and which need the pool. Plain data with no import of
// the GPU API, so that the CLI can validate --mode before anything touches the GPU. The streams themselves are picked
// by the task loop in batch.ts.

/** The modes in the order they run and print. */
export const MODES = ['native', 'legacy', 'per-thread', 'per-task', 'pool', 'lease', 'graph'] as const;

/** One way of giving a task its stream. */
export type Mode = (typeof MODES)[number];

/** Every mode a results file can hold: the modes above. */
export type ResultMode = Mode;

/** What each mode means, for `--help`, the report's notes, the timeline and the README. */
export const MODE_DESCRIPTIONS: Record<ResultMode, string> = {
  native: 'the baseline: C++ threads of the benchmark addon, one per slot, each on a stream of its own, waiting with cuStreamSynchronize',
  legacy: 'every task on the legacy default stream (tasks serialize)',
  'per-thread': "every task on its thread's per-thread default stream (one stream per thread)",
  'per-task': 'a stream created for each task and destroyed after it (Stream.create / destroy)',
  pool: 'pool.getStream(): shared pool streams handed out round-robin',
  lease: 'pool.run(): an exclusive lease on a pool stream per task, released when the task ends',
  graph: "pool.getStream(), and the task's copy-in, kernel and copy-out as one GraphExec.launch() (a graph per slot and partition)",
};

/** Whether the mode needs the shared pool. */
export function usesPool(mode: Mode): boolean {
  return mode === 'pool' || mode === 'lease' || mode === 'graph';
}
