// The watchdog: a worker thread that watches every soak thread's step counter in the heartbeat buffer, outside their
// event loops. A thread whose counter stands still longer than the limit is blocked (a synchronous call that never
// returns, or a deadlock): the watchdog writes the seed, the steps and the last lines of every thread to stderr and
// kills the process, so the run fails loudly instead of hanging. (Awaits that hang are caught sooner, by the step
// timeout.)
import { writeSync } from 'node:fs';
import { isMainThread, Worker, workerData } from 'node:worker_threads';

import { Heartbeat, heartbeatSlots } from './heartbeat.js';

interface WatchdogData {
  role: 'cuda-stream-pool.soak.watchdog';
  heartbeat: SharedArrayBuffer;
  seed: number;
  limitMs: number;
  history: number;
  /** How to replay the seed, printed with the report. */
  replay: string;
}

const POLL_MS = 250;

/** Starts the watchdog over `heartbeat`; it does not keep the process alive. */
export function startWatchdog(data: Omit<WatchdogData, 'role'>): Worker {
  // No flags of this process (such as --input-type or --expose-gc) are needed or wanted in the watchdog.
  const worker = new Worker(new URL(import.meta.url), { workerData: { role: 'cuda-stream-pool.soak.watchdog', ...data }, execArgv: [] });
  worker.unref();
  return worker;
}

/** The report for a thread blocked at its step: every thread's last lines. */
export function blockedReport(data: Pick<WatchdogData, 'heartbeat' | 'seed' | 'history' | 'replay'>, slot: number, seconds: number): string {
  const lines: string[] = [];
  const threadName = (s: number) => (s === 0 ? 'the main thread' : `worker slot ${s}`);
  for (let s = 0; s < heartbeatSlots(data.heartbeat); s++) {
    const state = new Heartbeat(data.heartbeat, s).read(data.history);
    if (state.step === 0 && state.lines.length === 0) continue;
    if (s === slot)
      lines.unshift(
        `SOAK WATCHDOG: seed ${data.seed}: ${threadName(s)} has been at step ${state.step} for ${seconds.toFixed(0)} s, blocked outside its event loop.`,
        `last steps of ${threadName(s)}:`,
        ...state.lines.map((l) => `  ${l}`),
      );
    else lines.push(`last steps of ${threadName(s)}${state.active ? '' : ' (not running)'}:`, ...state.lines.map((l) => `  ${l}`));
  }
  lines.push(`replay: ${data.replay}`, 'killing the process (SIGKILL).');
  return `${lines.join('\n')}\n`;
}

function watch(data: WatchdogData): void {
  const slots = heartbeatSlots(data.heartbeat);
  const beats = Array.from({ length: slots }, (_, s) => new Heartbeat(data.heartbeat, s));
  const seen = beats.map(() => ({ step: -1, since: performance.now() }));
  setInterval(() => {
    const now = performance.now();
    for (let s = 0; s < slots; s++) {
      const state = beats[s]!.read(0);
      const last = seen[s]!;
      if (!state.active || state.step !== last.step) {
        last.step = state.active ? state.step : -1;
        last.since = now;
        continue;
      }
      if (now - last.since > data.limitMs) {
        writeSync(2, blockedReport(data, s, (now - last.since) / 1000));
        process.kill(process.pid, 'SIGKILL');
      }
    }
  }, POLL_MS);
}

if (!isMainThread && (workerData as Partial<WatchdogData> | undefined)?.role === 'cuda-stream-pool.soak.watchdog') watch(workerData as WatchdogData);
