// The executor benchmark's task loop (Note [a task loop as lean as a user's] in packages/cuda-stream-pool-bench/src/batch.ts) on the simulated
// driver, whose kernels write what the GPU would: every mode records each task once, verified, with its stream and
// ascending phase times; a wrong output element still fails the run naming the task.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { benchCli, repositoryRoot } from '../support/paths.js';
import { needsCompiler, simulatedDriver } from '../support/simulated-driver.js';

const SMALL = ['--tasks', '48', '--concurrency', '8', '--pool-size', '4', '--runs', '1', '--elements', '4096', '--intensity', '3'];

function bench(args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [benchCli, 'bench', ...args], {
    cwd: repositoryRoot,
    encoding: 'utf8',
    env: { ...process.env, CUDA_STREAM_POOL_LIBCUDA: simulatedDriver(), SIMULATED_DRIVER_DEVICES: '1', ...env },
    timeout: 240_000,
  });
}

interface ModeResult {
  mode: string;
  verifiedTasks: number;
  streams: number;
  lastRunTasks: { task: number; thread: number; streamId: string; marksMs: number[] }[];
}

test('every JS mode records each task once, in order, verified, with its stream and ascending phase times', needsCompiler, () => {
  const r = bench([...SMALL, '--mode', 'legacy,per-thread,per-task,pool,lease,graph', '--json', '--phases', '--quiet']);
  assert.equal(r.status, 0, r.stderr);
  const modes = (JSON.parse(r.stdout) as { modes: ModeResult[] }).modes;
  assert.deepEqual(modes.map((m) => m.mode), ['legacy', 'per-thread', 'per-task', 'pool', 'lease', 'graph']);
  const streams: Record<string, number> = {};
  for (const m of modes) {
    assert.equal(m.verifiedTasks, 48, m.mode);
    assert.deepEqual(m.lastRunTasks.map((t) => t.task), Array.from({ length: 48 }, (_, i) => i), `${m.mode}: every task once, in order`);
    for (const t of m.lastRunTasks) {
      assert.equal(t.thread, 0);
      assert.match(t.streamId, /^\d+$/);
      assert.ok(t.marksMs[0]! >= 0 && t.marksMs.every((v, k) => k === 0 || v >= t.marksMs[k - 1]!), `${m.mode} task ${t.task}: ${t.marksMs}`);
    }
    streams[m.mode] = m.streams;
  }
  assert.deepEqual(streams, { legacy: 1, 'per-thread': 1, 'per-task': 48, pool: 4, lease: 4, graph: 4 });
});

test('a wrong output element fails the run in the JS loop, naming the task and the element', needsCompiler, () => {
  const r = bench([...SMALL, '--mode', 'pool', '--quiet'], { CUDA_STREAM_POOL_BENCH_CORRUPT: '5:123' });
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /verification failed: task 5 \(mode pool\) element 123 is \S+, expected \S+/);
});

test('with workers, the tasks are split among the threads and each is recorded once by the thread that ran it', needsCompiler, () => {
  const r = bench([...SMALL, '--mode', 'lease', '--workers', '2', '--json', '--phases', '--quiet']);
  assert.equal(r.status, 0, r.stderr);
  const [lease] = (JSON.parse(r.stdout) as { modes: ModeResult[] }).modes;
  assert.equal(lease!.verifiedTasks, 48);
  assert.deepEqual(lease!.lastRunTasks.map((t) => t.task), Array.from({ length: 48 }, (_, i) => i));
  assert.deepEqual([...new Set(lease!.lastRunTasks.map((t) => t.thread))].sort(), [1, 2]);
});

test('deferred submission with workers sharing the pool: a stalled issue holds back the other worker\'s work on the shared streams, and the results and the report count those order waits', needsCompiler, () => {
  // One submission thread per JS thread: the main thread's is the first to call the driver, a worker's the second.
  // Its 12th copy in (a task of the measured run, after 8 of the warm-up) blocks it for 300 ms.
  const env = { CUDA_STREAM_POOL_SUBMISSION: 'deferred', CUDA_STREAM_POOL_SUBMISSION_THREADS: '1', SIMULATED_DRIVER_FAIL: 'cuMemcpyHtoDAsync@csp-submit/2:12=stall:300', SIMULATED_DRIVER_TRACE: '1' };
  const r = bench([...SMALL, '--mode', 'native,pool', '--workers', '2', '--json', '--quiet'], env);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /injected into call 12 of cuMemcpyHtoDAsync on csp-submit\/2/, 'the stall happened');
  const result = JSON.parse(r.stdout) as { modes: { mode: string; verifiedTasks: number; orderWaits?: { perTask: number; msPerRun: number } }[] };
  const [native, pool] = result.modes;
  assert.equal(native!.orderWaits, undefined, 'native issues from C++ threads: nothing to count');
  assert.equal(pool!.verifiedTasks, 48);
  assert.ok(pool!.orderWaits!.perTask > 0 && pool!.orderWaits!.perTask <= 4, `${pool!.orderWaits!.perTask} order waits per task`);
  assert.ok(pool!.orderWaits!.msPerRun >= 50, `${pool!.orderWaits!.msPerRun} ms waited`);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'csp-order-waits-'));
  try {
    writeFileSync(path.join(dir, 'run.json'), r.stdout);
    const report = spawnSync(process.execPath, [benchCli, 'report', path.join(dir, 'run.json')], { cwd: repositoryRoot, encoding: 'utf8' });
    assert.equal(report.status, 0, report.stderr);
    assert.match(report.stdout, /^ {4}pool: \d\.\d+(?: \(one in [\d,]+ tasks\))? per task, \d+\.\d ms per run$/m);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
