// One seed of the soak, in this process (started by test/soak/main.ts, one child process per seed): the main
// thread's random steps, the workers, the teardown, and the end checks (every live-object count back to where it
// started, the completion engine idle, the process free to exit). argv[2]: the SeedRun as JSON.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { completionStats, cuda, Device, StreamPool } from 'cuda-stream-pool';
import { native } from '#library/binding/binding.js';

import { describeError, SoakFailure } from './check.js';
import { Context } from './context.js';
import { Fleet, fleetOperations } from './fleet.js';
import { Heartbeat, heartbeatBuffer } from './heartbeat.js';
import { LeaseLedger } from './ledger.js';
import { operations } from './operations/index.js';
import { addPool } from './operations/pools.js';
import { Random } from './random.js';
import { beginStep, runSteps, teardown } from './thread.js';
import { liveObjectsDifference, replayCommand, type SeedResult, type SeedRun } from './report.js';
import { startWatchdog } from './watchdog.js';

const SHARED_POOL_SIZE = 4;
/** The running seed's main-thread context and heartbeat buffer, for the failure report. */
const current: { ctx?: Context; heartbeat?: SharedArrayBuffer; randomSteps?: number } = {};
const repositoryRoot = fileURLToPath(new URL('../../../', import.meta.url));

/** Captures still open after teardown, which hold back frees and unloads until they close: what a leak report needs
 * first. Empty when there are none. */
function captureGuardReport(): string {
  const state = native.captureGuardState();
  const parts: string[] = [];
  for (let i = 0; i + 2 < state.length; i += 3) parts.push(`device ${state[i]}: ${state[i + 1]} open, ${state[i + 2]} frees or unloads waiting for them`);
  return parts.length > 0 ? `; captures: ${parts.join('; ')}` : '';
}

async function main(run: SeedRun): Promise<SeedResult> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new SoakFailure('the soak needs node --expose-gc (npm run soak passes it)');
  const ptx = readFileSync(`${repositoryRoot}test/kernels/test-kernels.ptx`, 'utf8');
  const started = performance.now();

  // What lives until exit is made before the counts are taken: every device's context and default pool (the
  // device-spreading operations use each device's).
  Device.get(0);
  const defaultSize = StreamPool.default().size;
  for (let ordinal = 1; ordinal < Device.count(); ordinal++) StreamPool.default(ordinal);
  const baseline = cuda.liveObjects();

  const buffer = heartbeatBuffer(1 + run.workers);
  const heartbeat = new Heartbeat(buffer, 0);
  heartbeat.reset();
  startWatchdog({ heartbeat: buffer, seed: run.seed, limitMs: run.watchdogSeconds * 1000, history: run.history, replay: replayCommand(run, 0).replace('--steps 0', '--steps <step>') });

  const ctx = new Context({ thread: 1, isMain: true, random: new Random(run.seed), heartbeat, stepTimeoutMs: run.stepTimeoutMs, ptx, gc });
  current.ctx = ctx;
  current.heartbeat = buffer;
  process.on('unhandledRejection', (error) => ctx.fail(`an unhandled rejection: ${describeError(error)}${error instanceof Error ? `\n${error.stack}` : ''}`));
  ctx.defaultLedger = new LeaseLedger(defaultSize);
  const sharedLedger = new LeaseLedger(SHARED_POOL_SIZE);
  const shared = addPool(ctx, new StreamPool({ size: SHARED_POOL_SIZE }), { owner: true, longLived: true, ledger: sharedLedger, label: 'shared' });
  ctx.sharedPool = { record: shared.pool.share(), ledger: sharedLedger };

  let fleet: Fleet | undefined;
  if (run.workers > 0) {
    fleet = new Fleet(
      ctx,
      {
        seed: run.seed,
        heartbeat: buffer,
        sharedPool: ctx.sharedPool.record,
        sharedLedger: sharedLedger.buffer,
        defaultLedger: ctx.defaultLedger.buffer,
        defaultSize,
        stepTimeoutMs: run.stepTimeoutMs,
        history: run.history,
        ptx,
      },
      [sharedLedger, ctx.defaultLedger],
    );
    for (let slot = 1; slot <= run.workers; slot++) fleet.start(slot);
  }

  const deadline = started + run.seconds * 1000;
  const table = fleet ? [...operations, ...fleetOperations(fleet)] : operations;
  await runSteps(ctx, table, () => performance.now() >= deadline || (run.steps !== undefined && ctx.step >= run.steps), run.verbose);
  const steps = ctx.step;
  current.randomSteps = steps;

  if (fleet) {
    await fleet.stopAll((line) => beginStep(ctx, line, run.verbose));
  }
  await teardown(ctx, run.verbose);

  beginStep(ctx, 'end: gc until cuda.liveObjects() is back to its start', run.verbose);
  ctx.model.forgetDead();
  let difference = '';
  for (const until = performance.now() + run.stepTimeoutMs; ; ) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 20));
    difference = liveObjectsDifference(baseline, cuda.liveObjects());
    if (!difference || performance.now() > until) break;
  }
  if (difference) {
    const suspects = ctx.model.reachableDropped();
    throw new SoakFailure(`cuda.liveObjects() did not return to its start after teardown and gc: ${difference}` + (suspects.length > 0 ? `; dropped objects still reachable: ${suspects.join(', ')}` : '') + captureGuardReport());
  }

  beginStep(ctx, 'end: the completion engine has nothing pending', run.verbose);
  for (const until = performance.now() + run.stepTimeoutMs; completionStats().processPending > 0; ) {
    if (performance.now() > until) throw new SoakFailure(`the completion engine still watches ${completionStats().processPending} waits after teardown`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  if (ctx.failures.length > 0) throw new SoakFailure(ctx.failures[0]!);
  beginStep(ctx, 'end: no failure was caught inside a finalizer, cleanup hook, delivery or library thread', run.verbose);
  const caught = cuda.callbackFailures();
  if (caught.count > 0) throw new SoakFailure(`${caught.count} failure(s) caught inside callbacks (cuda.callbackFailures()); the last: ${caught.last}`);
  heartbeat.idle();
  return {
    ok: true,
    seed: run.seed,
    steps,
    workerSteps: fleet?.steps ?? 0,
    workersStarted: fleet?.started ?? 0,
    workersTerminated: fleet?.terminated ?? 0,
    invalidCalls: ctx.invalidCalls + (fleet?.invalidCalls ?? 0),
    roundTrips: ctx.roundTrips + (fleet?.roundTrips ?? 0),
    seconds: (performance.now() - started) / 1000,
    tally: Object.fromEntries([...ctx.tally].map(([name, count]) => [name, count + (fleet?.tally.get(name) ?? 0)])),
  };
}

function send(result: SeedResult, then: () => void): void {
  if (process.send) process.send(result, () => then());
  else then();
}

const run = JSON.parse(process.argv[2] ?? '{}') as SeedRun;
if (!cuda.available) {
  console.error(`soak: no usable CUDA GPU: ${cuda.unavailableReason}`);
  process.exit(2);
}
try {
  const result = await main(run);
  if (result.ok)
    console.log(
      `seed ${run.seed}: ok: ${result.steps} main-thread steps, ${result.workerSteps} worker steps (${result.workersStarted} workers started, ` +
        `${result.workersTerminated} terminated), ${result.invalidCalls} invalid calls refused with typed errors, ${result.roundTrips} round trips ` +
        `checked, live objects back to start, in ${result.seconds.toFixed(1)} s`,
    );
  // Nothing may keep the process alive now: the orchestrator fails the seed if it does not exit soon.
  send(result, () => process.disconnect?.());
} catch (error) {
  const step = current.ctx?.step ?? 0;
  const message = error instanceof SoakFailure ? error.message : `the soak itself threw ${describeError(error)}${error instanceof Error ? `\n${error.stack}` : ''}`;
  const lines = [`SOAK FAILED: seed ${run.seed}, step ${step} of the main thread`, message];
  // Failures other threads reported meanwhile (a worker's own report can precede the hang it causes here).
  for (const other of current.ctx?.failures ?? []) if (other !== message) lines.push(`also: ${other}`);
  if (current.heartbeat)
    for (let slot = 0; slot < 1 + run.workers; slot++) {
      const state = new Heartbeat(current.heartbeat, slot).read(run.history);
      if (state.lines.length === 0) continue;
      lines.push(`last steps of ${slot === 0 ? 'the main thread' : `worker slot ${slot}`}:`, ...state.lines.map((l) => `  ${l}`));
    }
  // A failure in the teardown or the end checks replays with all the random steps (then the same teardown).
  lines.push(`replay: ${replayCommand(run, Math.min(step, current.randomSteps ?? step))}`);
  console.error(lines.join('\n'));
  send({ ok: false, seed: run.seed, step, message }, () => process.exit(1));
}
