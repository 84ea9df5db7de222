// What one seed's run is asked to do and what it reports, and the texts both ends print: the replay command and the
// difference of live-object counts. (No side effects: test/soak/seed.ts is the script.)
import type { LiveObjects } from 'cuda-stream-pool';

/** What the orchestrator asks one seed to do. */
export interface SeedRun {
  seed: number;
  seconds: number;
  workers: number;
  steps: number | undefined;
  verbose: boolean;
  stepTimeoutMs: number;
  watchdogSeconds: number;
  history: number;
}

/** What a seed's process reports to the orchestrator. */
export type SeedResult =
  | {
      ok: true;
      seed: number;
      steps: number;
      workerSteps: number;
      workersStarted: number;
      workersTerminated: number;
      invalidCalls: number;
      roundTrips: number;
      seconds: number;
      tally: Record<string, number>;
    }
  | { ok: false; seed: number; step: number; message: string };

/** The command that replays `seed` up to `step`. */
export function replayCommand(run: Pick<SeedRun, 'seed' | 'workers'>, step: number): string {
  return `npm run soak -- --replay ${run.seed} --steps ${step}${run.workers > 0 ? ` --workers ${run.workers} (with workers the interleaving differs from run to run)` : ''}`;
}

/** Where live-object counts differ from `start`, in words; empty when they match. */
export function liveObjectsDifference<T extends LiveObjects>(start: T, now: T): string {
  return (Object.keys(start) as Array<keyof T>)
    .filter((key) => String(start[key]) !== String(now[key])) // counts, and the list of retained contexts
    .map((key) => `${String(key)} ${now[key]} (at start ${start[key]})`)
    .join(', ');
}
