// A soak worker thread (started by test/soak/fleet.ts): attaches the main thread's shared pool, steps through random
// operations of its own (including the shared buffers the main thread posts), and on `stop` tears everything down
// and reports its tallies. A failure is reported with its last steps; the main thread fails the run.
import { parentPort, workerData } from 'node:worker_threads';

import { StreamPool } from 'cuda-stream-pool';

import { describeError, SoakFailure } from './check.js';
import { Context } from './context.js';
import type { WorkerCommand, WorkerReport, WorkerSetup } from './fleet.js';
import { Heartbeat } from './heartbeat.js';
import { LeaseLedger } from './ledger.js';
import { operations } from './operations/index.js';
import { addPool } from './operations/pools.js';
import { Random } from './random.js';
import { runSteps, teardown } from './thread.js';

const setup = workerData as WorkerSetup;
const port = parentPort!;
const post = (report: WorkerReport) => port.postMessage(report);
const heartbeat = new Heartbeat(setup.heartbeat, setup.slot);
heartbeat.reset();

const gc = (globalThis as { gc?: () => void }).gc;
const ctx = new Context({
  thread: setup.thread,
  isMain: false,
  random: new Random(setup.seed).derive(setup.thread),
  heartbeat,
  stepTimeoutMs: setup.stepTimeoutMs,
  ptx: setup.ptx,
  gc: gc ?? (() => undefined),
});
const sharedLedger = new LeaseLedger(setup.sharedPool.size, setup.sharedLedger);
ctx.sharedPool = { record: setup.sharedPool, ledger: sharedLedger };
ctx.defaultLedger = new LeaseLedger(setup.defaultSize, setup.defaultLedger);

let stopping = false;
port.on('message', (command: WorkerCommand) => {
  if (command.type === 'stop') stopping = true;
  else {
    ctx.inbox.push(command.shared);
    if (ctx.inbox.length > 8) ctx.inbox.shift();
  }
});
// The steps keep the thread alive; once they end and the teardown is done, nothing should.
port.unref();

try {
  addPool(ctx, StreamPool.attach(setup.sharedPool), { owner: false, longLived: false, ledger: sharedLedger, label: 'attached' });
  await runSteps(ctx, operations, () => stopping);
  await teardown(ctx);
  post({ type: 'done', steps: ctx.step, tally: Object.fromEntries(ctx.tally), invalidCalls: ctx.invalidCalls, roundTrips: ctx.roundTrips });
} catch (error) {
  const message = error instanceof SoakFailure ? error.message : `the worker threw ${describeError(error)}${error instanceof Error ? `\n${error.stack}` : ''}`;
  post({ type: 'failure', step: ctx.step, message, lines: heartbeat.read(setup.history).lines });
} finally {
  heartbeat.idle();
}
