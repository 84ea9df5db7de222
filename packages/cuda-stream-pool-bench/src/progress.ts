// The progress bar of `bench` on stderr (cli-progress), shown only when stderr is a terminal and --quiet is off, so
// that logs and pipes get clean output.
import cliProgress from 'cli-progress';

/** Progress over the measured tasks of every mode and run; warm-ups and calibration show as a status only. */
export interface Progress {
  /** Sets the status text (the mode running, or the preparation step). */
  status(text: string): void;
  /** Counts `tasks` measured tasks (default 1) as done. */
  tick(tasks?: number): void;
  /** Removes the bar; safe to call more than once. */
  stop(): void;
}

const silent: Progress = { status() {}, tick() {}, stop() {} };

/** A progress bar over `total` tasks, or a silent one when stderr is not a terminal or `quiet` is set. */
export function createProgress(total: number, quiet: boolean): Progress {
  if (quiet || !process.stderr.isTTY) return silent;
  const bar = new cliProgress.SingleBar(
    {
      stream: process.stderr,
      format: 'bench {status} [{bar}] {value}/{total} tasks | {duration_formatted}',
      clearOnComplete: true,
      hideCursor: true,
      fps: 10,
    },
    cliProgress.Presets.shades_classic,
  );
  bar.start(total, 0, { status: 'preparing' });
  let stopped = false;
  return {
    status(text) {
      if (!stopped) bar.update({ status: text });
    },
    tick(tasks = 1) {
      if (!stopped) bar.increment(tasks);
    },
    stop() {
      if (stopped) return;
      stopped = true;
      bar.stop();
    },
  };
}
