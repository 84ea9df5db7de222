// One process of the fault sweep: runs a workload (argv[2]) twice on the simulated driver and prints one JSON line
// (a ChildReport) for the sweep to judge. The first run meets the injected failure; the second shows whether the
// library recovered. Between and after the runs it waits for cuda.liveObjects() to come back to its start.
import v8 from 'node:v8';
import vm from 'node:vm';

import { completionStats, cuda, Device, type LiveObjects } from 'cuda-stream-pool';

import { describeError, type ErrorDescription } from './workload.js';
import { workloads } from './workloads/index.js';

/** The outcome of one run of a workload. */
export interface RunOutcome {
  /** `ok`: it finished; `error`: it threw; `hang`: it did not settle within the run's limit. */
  result: 'ok' | 'error' | 'hang';
  error?: ErrorDescription;
  ms: number;
  /** The live objects once settled after the run (contexts left out: they stay retained by design). */
  live: Omit<LiveObjects, 'contexts' | 'leakedDeviceBytes'>;
}

/** What a child process prints, on its last line of stdout. */
export interface ChildReport {
  available: boolean;
  start?: Omit<LiveObjects, 'contexts' | 'leakedDeviceBytes'>;
  runs: RunOutcome[];
  /** `device.healthy` of each device, after the runs. */
  healthy: boolean[];
  callbackFailures: { count: number; last: string | undefined };
  /** cuda.liveObjects().leakedDeviceBytes at the end: only a refused free may leak, so 0 without an injected failure. */
  leakedDeviceBytes: number;
}

// A run takes well under a second; a loaded machine can make a worker's start take seconds.
const RUN_LIMIT_MS = Number(process.env.FAULT_SWEEP_RUN_LIMIT_MS ?? 20_000);
// The sweep counts calls with one run, so that every call it fails falls in the first run of two.
const RUNS = Number(process.env.FAULT_SWEEP_RUNS ?? 2);

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

// Memory a refused free leaked on purpose (never freed while work may use it) is counted apart, in leakedDeviceBytes.
const live = (): Omit<LiveObjects, 'contexts' | 'leakedDeviceBytes'> => {
  const { contexts: _, leakedDeviceBytes: __, ...rest } = cuda.liveObjects();
  return rest;
};
const same = (a: object, b: object) => JSON.stringify(a) === JSON.stringify(b);

// Garbage is collected between rounds so that finalizers run; managed memory is released after the device's work.
async function settle(start: object): Promise<Omit<LiveObjects, 'contexts' | 'leakedDeviceBytes'>> {
  for (let round = 0; round < 100; round++) {
    if (same(live(), start)) break;
    gc();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return live();
}

async function runOnce(run: () => Promise<void>, start: object): Promise<RunOutcome> {
  const began = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<'hang'>((resolve) => (timer = setTimeout(() => resolve('hang'), RUN_LIMIT_MS)));
  const outcome = await Promise.race([
    run().then(
      () => ({ result: 'ok' as const }),
      (error: unknown) => ({ result: 'error' as const, error: describeError(error) }),
    ),
    limit.then(() => ({ result: 'hang' as const })),
  ]);
  clearTimeout(timer);
  const ms = Math.round(performance.now() - began);
  return { ...outcome, ms, live: outcome.result === 'hang' ? live() : await settle(start) };
}

const name = process.argv[2];
const workload = workloads.find((w) => w.name === name);
if (!workload) throw new Error(`no workload named ${name}`);

const report: ChildReport = { available: cuda.available, runs: [], healthy: [], callbackFailures: { count: 0, last: undefined }, leakedDeviceBytes: 0 };
if (cuda.available) {
  const start = live();
  report.start = start;
  for (let i = 0; i < RUNS; i++) {
    // The sweep tells by this line whether the injected call fell in the first run (the driver's trace line comes
    // before it) or later: some threads' counts depend on timing. Writes to a pipe are synchronous on Linux.
    if (i > 0) process.stderr.write(`fault sweep: run ${i + 1} begins\n`);
    const outcome = await runOnce(() => workload.run(), start);
    report.runs.push(outcome);
    if (outcome.result === 'hang') break;
  }
  // After an injected fault, the poller may still be letting go of the last waits' streams: a borrowed stream's
  // release records its retirement event there, and a fault injected into that record reaches no wait of the runs.
  // Once the poller has parked, a device-wide wait asks each device, as a user would before trusting `healthy`. A
  // release can still come later (a finalizer's wait), so the sweep learns by this line whether the injected call
  // came before that wait.
  if (/=fault:/.test(process.env.SIMULATED_DRIVER_FAIL ?? '')) {
    for (let waited = 0; !completionStats().pollerParked && waited < 2000; waited += 5) await new Promise((resolve) => setTimeout(resolve, 5));
    process.stderr.write('fault sweep: health read\n');
    for (let d = 0; d < Device.count(); d++) await Device.get(d).synchronize({ signal: AbortSignal.timeout(5000) }).catch(() => undefined);
  }
  for (let d = 0; d < Device.count(); d++) report.healthy.push(Device.get(d).healthy);
}
report.callbackFailures = cuda.callbackFailures();
report.leakedDeviceBytes = cuda.liveObjects().leakedDeviceBytes;
console.log(JSON.stringify(report));
// A hung run leaves its wait behind; the sweep has what it needs, and a process that then stays is not the finding.
if (report.runs.some((r) => r.result === 'hang')) process.exit(3);
