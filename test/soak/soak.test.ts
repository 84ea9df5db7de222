// The soak harness (test/soak/): its pure parts on the CPU (seeded choices, options, the lease ledger, the model's
// bookkeeping, the heartbeat and the watchdog, the error checks), and bounded soak runs on the GPU, each seed in
// its own process, which must exit 0.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';

import { CommanderError } from 'commander';

import { cuda, CudaError, DestroyedError } from 'cuda-stream-pool';
import { errorKind, errorProblem, SoakFailure } from './check.js';
import { Context } from './context.js';
import type { Operation } from './operation.js';
import { runSteps } from './thread.js';
import { blockedReport } from './watchdog.js';
import { Heartbeat, heartbeatBuffer, LINE_BYTES } from './heartbeat.js';
import { DoubleLeaseError, LeaseLedger } from './ledger.js';
import { Model, Registry, type Entry, type StreamEntry } from './model.js';
import { parseSoakOptions } from './options.js';
import { Random } from './random.js';
import { liveObjectsDifference, replayCommand } from './report.js';
import { runChild } from '../support/child.js';
import { gpu, repositoryRoot } from '../support/gpu.js';

const soakMain = path.join(repositoryRoot, 'dist', 'test', 'soak', 'main.js');

/** A context for the step loop without a GPU: fake operations only. */
function fakeContext(seed: number, stepTimeoutMs = 1000): Context {
  const heartbeat = new Heartbeat(heartbeatBuffer(1), 0);
  heartbeat.reset();
  return new Context({ thread: 1, isMain: true, random: new Random(seed), heartbeat, stepTimeoutMs, ptx: '', gc: () => undefined });
}

/** Operations that touch no GPU: each plans from the random choices and records what it ran. */
function fakeOperations(log: string[]): Operation[] {
  const op = (name: string, weight: number, run: (ctx: Context, n: number) => unknown): Operation => ({
    name,
    weight,
    threads: 'any',
    plan(ctx) {
      const n = ctx.random.int(0, 99);
      return n < 10 ? undefined : { text: `${name} ${n}`, run: async () => void (await run(ctx, n), log.push(`${name} ${n}`)) };
    },
  });
  return [op('a', 1, () => undefined), op('b', 2, () => Promise.resolve()), op('c', 0.5, () => undefined), op('main only', 1, () => undefined)].map((o, i) =>
    i === 3 ? { ...o, threads: 'worker' as const } : o,
  );
}

test('the step loop replays the same steps for a seed, skips operations that do not apply, and counts them', async () => {
  const runs = await Promise.all(
    [11, 11, 12].map(async (seed) => {
      const log: string[] = [];
      const ctx = fakeContext(seed);
      await runSteps(ctx, fakeOperations(log), () => ctx.step >= 200);
      return { log, lines: ctx.heartbeat.read(64).lines, tally: ctx.tally };
    }),
  );
  assert.equal(runs[0]!.log.length, 200);
  assert.deepEqual(runs[0]!.log, runs[1]!.log);
  assert.deepEqual(runs[0]!.lines, runs[1]!.lines);
  assert.notDeepEqual(runs[0]!.log, runs[2]!.log);
  assert.ok(!runs[0]!.log.some((line) => line.startsWith('main only')), 'a worker-only operation is not drawn on the main thread');
  assert.match(runs[0]!.lines.at(-1)!, /^#200 [abc]: [abc] \d+$/);
  assert.equal([...runs[0]!.tally.values()].reduce((a, b) => a + b, 0), 200);
});

test('a valid call that throws fails the run, naming the operation, the error and the step', async () => {
  const ctx = fakeContext(3);
  const failing: Operation = { name: 'stream.query', weight: 1, threads: 'any', plan: () => ({ text: 'x', run: () => { throw new TypeError('target.record is not a function'); } }) };
  await assert.rejects(runSteps(ctx, [failing], () => false), (e: unknown) => e instanceof SoakFailure && /stream\.query: a valid call threw TypeError \(no code\): target\.record/.test(e.message));
  assert.equal(ctx.heartbeat.read(1).lines[0], '#1 stream.query: x');
});

test('an await that does not settle within the step timeout fails as a hang naming the step', async () => {
  const ctx = fakeContext(3, 50);
  const hanging: Operation = { name: 'event.wait', weight: 1, threads: 'any', plan: (c) => ({ text: 'never', run: () => c.within(new Promise(() => undefined), 'event#4.synchronize()') }) };
  await assert.rejects(runSteps(ctx, [hanging], () => false), /hang: event#4\.synchronize\(\) did not settle within 50 ms \(step 1\)/);
});

test('an invalid call that is accepted, or refused with the wrong or an untyped error, fails the run', async () => {
  const ctx = fakeContext(3);
  assert.throws(() => ctx.invalid('alloc(0)', ['range'], () => 1), /alloc\(0\) was accepted; expected a range error/);
  assert.throws(() => ctx.invalid('alloc(0)', ['range'], () => { throw new Error('plain'); }), /threw an untyped error: Error \(no code\): plain/);
  assert.throws(() => ctx.invalid('query()', ['destroyed'], () => { throw Object.assign(new TypeError('x'), { code: 'ERR_INVALID_ARG_TYPE' }); }), /a type error where destroyed was expected/);
  ctx.invalid('query()', ['destroyed'], () => { throw new DestroyedError('Stream', 'query'); });
  await ctx.invalidAsync('acquire()', ['destroyed'], Promise.reject(new DestroyedError('StreamPool', 'acquire')));
  await assert.rejects(ctx.invalidAsync('acquire()', ['destroyed'], Promise.resolve(1)), /resolved; expected it to reject/);
  assert.equal(ctx.invalidCalls, 2);
});

/** Runs `npm run soak` with `args` (from dist/, as the GPU machine does) and returns its exit and output. */
function soak(args: string[]): Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [soakMain, ...args], { cwd: repositoryRoot, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, output }));
  });
}

function draw(random: Random, n: number): number[] {
  return Array.from({ length: n }, () => random.int(0, 1_000_000));
}

test('a seed replays the same choices, and another seed makes other ones', () => {
  assert.deepEqual(draw(new Random(42), 50), draw(new Random(42), 50));
  assert.notDeepEqual(draw(new Random(42), 50), draw(new Random(43), 50));
  const items = [{ weight: 1 }, { weight: 0 }, { weight: 3 }];
  const picks = (seed: number) => Array.from({ length: 200 }, ((r) => () => items.indexOf(r.weighted(items)))(new Random(seed)));
  assert.deepEqual(picks(7), picks(7));
  assert.ok(!picks(7).includes(1), 'an operation of weight 0 is never drawn');
  assert.deepEqual(draw(new Random(5).derive(3), 20), draw(new Random(5).derive(3), 20));
  assert.notDeepEqual(draw(new Random(5).derive(3), 20), draw(new Random(5).derive(4), 20), 'each worker gets its own sequence');
});

test('Random.int() stays within its inclusive bounds and reaches both ends', () => {
  const random = new Random(1);
  const seen = new Set(Array.from({ length: 2000 }, () => random.int(3, 7)));
  assert.deepEqual([...seen].sort(), [3, 4, 5, 6, 7]);
  for (let i = 0; i < 500; i++) {
    const size = random.size(4096);
    assert.ok(size >= 1 && size <= 4096, `size ${size}`);
  }
  assert.equal(new Random(9).bytes(13).length, 13);
  assert.deepEqual(new Random(9).bytes(13), new Random(9).bytes(13));
});

test('soak options: defaults, seed lists, replay, and refused combinations exit 64', () => {
  assert.deepEqual(parseSoakOptions([]), {
    seeds: [1],
    seconds: 10,
    workers: 0,
    steps: undefined,
    verbose: false,
    stepTimeoutMs: 10_000,
    watchdogSeconds: 30,
    history: 20,
  });
  const o = parseSoakOptions(['--seeds', '1,2,3', '--seconds', '2.5', '--workers', '4']);
  assert.deepEqual([o.seeds, o.seconds, o.workers], [[1, 2, 3], 2.5, 4]);
  assert.deepEqual(parseSoakOptions(['--', '--seed', '8']).seeds, [8], 'a leading -- (npm run soak -- ...) is skipped');
  const replay = parseSoakOptions(['--replay', '17', '--steps', '512']);
  assert.deepEqual([replay.seeds, replay.steps, replay.verbose], [[17], 512, true]);
  const refused = (argv: string[], pattern: RegExp) =>
    assert.throws(
      () => parseSoakOptions(argv, undefined),
      (error: unknown) => error instanceof CommanderError && error.exitCode !== 0 && pattern.test(error.message),
    );
  // Commander writes its own messages to stderr; these checks only read the error it throws.
  const quiet = process.stderr.write;
  process.stderr.write = () => true;
  try {
    refused(['--seed', '1', '--seeds', '2'], /--seed and --seeds cannot be combined/);
    refused(['--replay', '1', '--seed', '2'], /--seed and --replay/);
    refused(['--seeds', '1,x'], /comma list of integers/);
    refused(['--seed', '-1'], /integer from 0 to 4294967295/);
    refused(['--seconds', '0'], /above 0/);
    refused(['--workers', '33'], /from 0 to 32/);
    refused(['--watchdog', '5', '--step-timeout', '5000'], /must be longer than/);
  } finally {
    process.stderr.write = quiet;
  }
});

test('the soak command exits 64 for refused options before it looks for a GPU', async () => {
  const child = await soak(['--seed', '1', '--seeds', '2']);
  assert.equal(child.code, 64, child.output);
  assert.match(child.output, /--seed and --seeds cannot be combined/);
});

test('the lease ledger refuses a stream leased twice, by another thread or the same one', () => {
  const ledger = new LeaseLedger(4);
  const other = new LeaseLedger(4, ledger.buffer); // another thread's view of the same words
  ledger.claim(2, 1, 'acquire');
  assert.equal(other.holder(2), 1);
  assert.throws(() => other.claim(2, 3, 'acquire'), (e: unknown) => e instanceof DoubleLeaseError && /thread 3 while thread 1 holds it/.test(e.message));
  assert.throws(() => ledger.claim(2, 1, 'acquire'), /already holds it/);
  assert.throws(() => other.unclaim(2, 3, 'release'), /ledger has thread 1/);
  ledger.unclaim(2, 1, 'release');
  other.claim(2, 3, 'acquire');
  assert.equal(ledger.held(), 1);
});

test('the lease ledger lets a terminated thread\'s streams be taken over, and clears them', () => {
  const ledger = new LeaseLedger(3);
  ledger.claim(0, 5, 'a');
  ledger.claim(1, 5, 'b');
  ledger.markDying(5);
  ledger.claim(0, 6, 'c');
  assert.equal(ledger.holder(0), 6);
  assert.equal(ledger.clearThread(5), 1);
  assert.equal(ledger.held(), 1);
  assert.throws(() => ledger.claim(0, 0, 'bad'), RangeError);
});

test('the lease ledger sees a claim made in a worker thread', async () => {
  const ledger = new LeaseLedger(2);
  const url = new URL('./ledger.js', import.meta.url).href;
  const worker = new Worker(
    `const { workerData, parentPort } = require('node:worker_threads');
     import(${JSON.stringify(url)}).then(({ LeaseLedger }) => {
       new LeaseLedger(2, workerData).claim(1, 9, 'worker acquire');
       parentPort.postMessage('claimed');
     });`,
    { eval: true, workerData: ledger.buffer },
  );
  await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  await worker.terminate();
  assert.throws(() => ledger.claim(1, 1, 'main acquire'), /thread 1 while thread 9 holds it/);
});

function entry<T extends object>(serial: number, extra: T): Entry & T {
  return { serial, label: `e${serial}`, alive: true, ...extra };
}

test('a registry keeps live entries up to its cap and the last destroyed ones for use after destroy', () => {
  const registry = new Registry<Entry>('things', 2, 3);
  const made = Array.from({ length: 6 }, (_, i) => entry(i, {}));
  registry.add(made[0]!);
  registry.add(made[1]!);
  assert.equal(registry.full, true);
  for (const e of made.slice(2)) registry.add(e);
  for (const e of made.slice(0, 5)) registry.retire(e);
  assert.deepEqual(registry.dead.map((e) => e.serial), [2, 3, 4], 'the oldest destroyed entries go first');
  assert.ok(made.slice(0, 5).every((e) => !e.alive));
  registry.drop(made[5]!);
  assert.deepEqual(registry.alive, []);
  assert.equal(registry.pick(new Random(1)), undefined);
  assert.ok([2, 3, 4].includes(registry.pickDead(new Random(1))!.serial));
});

test('the teardown order ends leases first, borrowers before their lenders, the long-lived pool last of the pools', () => {
  const model = new Model();
  const fake = {} as never;
  const lender = model.addStream(fake, 'owned');
  const borrower = model.addStream(fake, 'borrowed', { lender });
  assert.deepEqual([...lender.borrowers], [borrower]);
  const pool = model.pools.add({ ...entry(50, { pool: fake, ledger: new LeaseLedger(1), ids: [1n], owner: true, longLived: false, waiting: 0 }) });
  const shared = model.pools.add({ ...entry(51, { pool: fake, ledger: new LeaseLedger(1), ids: [2n], owner: true, longLived: true, waiting: 0 }) });
  const view = model.addStream(fake, 'lease', { pool });
  const lease = model.leases.add({ ...entry(52, { lease: fake, pool, slot: 0, view }) });
  const buffer = model.buffers.add({ ...entry(53, { buffer: fake, view: false }) });
  const order = model.teardownOrder().map((item) => item.entry);
  const at = (e: Entry) => (order as Entry[]).indexOf(e);
  assert.equal(at(lease), 0);
  assert.ok(at(borrower) < at(lender) && at(buffer) < at(lender));
  assert.ok(at(pool) < at(shared) && at(shared) < at(lender));
  assert.equal(at(view), -1, 'lease streams end with their lease and pool');
  model.retireStream(borrower);
  assert.equal(lender.borrowers.size, 0);
  assert.deepEqual(model.streamsOf(pool), [view]);
  assert.deepEqual(model.leasesOf(pool), [lease]);
  void (shared satisfies Entry), (view satisfies StreamEntry);
});

test('a heartbeat slot keeps the last lines in order and cuts long ones; slots are independent', () => {
  const buffer = heartbeatBuffer(2);
  const main = new Heartbeat(buffer, 0);
  const worker = new Heartbeat(buffer, 1);
  main.reset();
  for (let step = 1; step <= 70; step++) main.begin(step, `#${step} step`);
  worker.reset();
  worker.begin(1, 'x'.repeat(LINE_BYTES + 50));
  const state = main.read(3);
  assert.deepEqual(state, { active: true, step: 70, lines: ['#68 step', '#69 step', '#70 step'] });
  assert.equal(worker.read().lines[0]!.length, LINE_BYTES);
  worker.idle();
  assert.equal(worker.read().active, false);
  assert.throws(() => new Heartbeat(buffer, 2), RangeError);
});

test('the watchdog report names the seed, the blocked thread\'s step and every thread\'s last steps', () => {
  const buffer = heartbeatBuffer(2);
  const main = new Heartbeat(buffer, 0);
  main.reset();
  main.begin(41, '#41 stream.query: stream#3(borrowed).query()');
  main.begin(42, '#42 stream.synchronizeSync: stream#2(owned).synchronizeSync()');
  const worker = new Heartbeat(buffer, 1);
  worker.reset();
  worker.begin(7, '#7 pool.acquire: pool#1 acquire()');
  const report = blockedReport({ heartbeat: buffer, seed: 9, history: 20, replay: 'npm run soak -- --replay 9 --steps <step>' }, 0, 31);
  assert.match(report, /^SOAK WATCHDOG: seed 9: the main thread has been at step 42 for 31 s/);
  assert.match(report, /#41 stream\.query.*\n.*#42 stream\.synchronizeSync/);
  assert.match(report, /last steps of worker slot 1:\n {2}#7 pool\.acquire/);
  assert.match(report, /replay: npm run soak -- --replay 9/);
});

test('the watchdog kills a process whose main thread blocks, after printing its last step', async () => {
  const watchdog = new URL('./watchdog.js', import.meta.url).href;
  const heartbeat = new URL('./heartbeat.js', import.meta.url).href;
  const child = await runChild(`
    const { startWatchdog } = await import(${JSON.stringify(watchdog)});
    const { Heartbeat, heartbeatBuffer } = await import(${JSON.stringify(heartbeat)});
    const buffer = heartbeatBuffer(1);
    const beat = new Heartbeat(buffer, 0);
    beat.reset();
    beat.begin(1, '#1 a step that returns');
    startWatchdog({ heartbeat: buffer, seed: 77, limitMs: 500, history: 5, replay: 'replay 77' });
    beat.begin(2, '#2 a synchronous call that never returns');
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20000);
    console.log('not killed');
  `);
  assert.equal(child.signal, 'SIGKILL', `stdout: ${child.stdout}\nstderr: ${child.stderr}`);
  assert.match(child.stderr, /SOAK WATCHDOG: seed 77: the main thread has been at step 2/);
  assert.match(child.stderr, /#2 a synchronous call that never returns/);
  assert.doesNotMatch(child.stdout, /not killed/);
  assert.ok(child.durationMs < 15_000, `killed after ${child.durationMs} ms`);
});

test('only the library\'s typed errors pass the soak\'s error check, each as its kind', () => {
  const coded = <E extends Error>(error: E, code: string) => Object.assign(error, { code });
  assert.equal(errorKind(coded(new TypeError('x'), 'ERR_INVALID_ARG_TYPE')), 'type');
  assert.equal(errorKind(coded(new TypeError('x'), 'ERR_INVALID_ARG_VALUE')), 'value');
  assert.equal(errorKind(coded(new RangeError('x'), 'ERR_OUT_OF_RANGE')), 'range');
  assert.equal(errorKind(new DestroyedError('Stream', 'query')), 'destroyed');
  assert.equal(errorKind(new CudaError(2 as never, 'CUDA_ERROR_OUT_OF_MEMORY' as never, 'out of memory', 'cuMemAllocAsync', '', false)), 'cuda');
  assert.equal(errorKind(new TypeError('target.record is not a function')), undefined, 'a TypeError without a code');
  assert.equal(errorKind(coded(new Error('x'), 'ERR_INVALID_ARG_TYPE')), undefined, 'a plain Error with a code');
  assert.equal(errorKind(coded(new TypeError('x'), 'ERR_OUT_OF_RANGE')), undefined, 'a code on the wrong class');
  assert.equal(errorKind('a string'), undefined);
  assert.equal(errorProblem(new DestroyedError('Event', 'record'), ['destroyed']), undefined);
  assert.match(errorProblem(new DestroyedError('Event', 'record'), ['type'])!, /a destroyed error where type was expected/);
  assert.match(errorProblem(new Error('boom'), ['type'])!, /untyped error: Error \(no code\): boom/);
});

test('the end check names each live-object count that differs from its start; replays name the seed and step', () => {
  const start = { ...cuda.liveObjects(), streams: 32, pinnedBytes: 0 };
  assert.equal(liveObjectsDifference(start, { ...start }), '');
  assert.equal(liveObjectsDifference(start, { ...start, streams: 33, pinnedBytes: 4096 }), 'streams 33 (at start 32), pinnedBytes 4096 (at start 0)');
  assert.equal(replayCommand({ seed: 3, workers: 0 }, 812), 'npm run soak -- --replay 3 --steps 812');
  assert.match(replayCommand({ seed: 3, workers: 4 }, 812), /--replay 3 --steps 812 --workers 4/);
});

test('the soak runs 3 seeds for 10 s each on the main thread alone and every seed ends clean', { ...gpu, timeout: 115_000 }, async () => {
  const result = await soak(['--seeds', '1,2,3', '--seconds', '10']);
  assert.equal(result.code, 0, result.output);
  assert.match(result.output, /soak: 3 of 3 seeds clean/);
});

test('the soak runs 3 seeds for 10 s each with 4 workers sharing the pool and buffers, and every seed ends clean', { ...gpu, timeout: 115_000 }, async () => {
  const result = await soak(['--seeds', '4,5,6', '--seconds', '10', '--workers', '4']);
  assert.equal(result.code, 0, result.output);
  assert.match(result.output, /soak: 3 of 3 seeds clean/);
});
