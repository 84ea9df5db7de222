// The Piscina example (examples/piscina): worker threads from Piscina attach one StreamPool and run tasks on leased
// streams of it; every result is right, every task took a lease of the shared pool, and its throughput is printed
// beside `bench --workers` with as many threads.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

import { fmaSteps } from '#bench/fmaf.js';
import { inputOf } from '../../examples/fma-task.js';
import { job, runWithPiscina } from '../../examples/piscina/main.js';
import { gpu } from '../support/gpu.js';
import { benchCli, repositoryRoot } from '../support/paths.js';

test('Piscina workers share one StreamPool: every task leases a stream of it and sums its output right', gpu, async (t) => {
  const run = { threads: 4, perThread: 8, tasks: 2000, elements: 4096, steps: 16 };
  const { sums, tasksPerSecond, leases } = await runWithPiscina(run);
  assert.equal(sums.length, run.tasks);
  assert.equal(leases, run.tasks, 'each task took one lease of the shared pool');
  for (let seed = 0; seed < run.tasks; seed += 37) {
    const { a, b } = job(seed, run);
    let expected = 0;
    for (const value of inputOf(seed, run.elements)) expected += fmaSteps(value, run.steps, a, b);
    assert.equal(sums[seed], expected, `task ${seed}'s sum`);
  }
  const bench = spawnSync(
    process.execPath,
    [benchCli, 'bench', '--workers', String(run.threads), '--concurrency', String(run.threads * run.perThread), '--mode', 'lease',
      '--tasks', String(run.tasks), '--elements', String(run.elements), '--intensity', String(run.steps), '--runs', '1', '--json', '--quiet'],
    { cwd: repositoryRoot, encoding: 'utf8', timeout: 300_000 },
  );
  assert.equal(bench.status, 0, bench.stderr);
  const lease = (JSON.parse(bench.stdout) as { modes: { tasksPerSecond: { median: number } }[] }).modes[0]!.tasksPerSecond.median;
  t.diagnostic(
    `${run.tasks} tasks of ${run.elements} float32 (${run.steps} FMA steps), ${run.threads} threads × ${run.perThread} in flight: ` +
      `Piscina ${tasksPerSecond.toFixed(0)} tasks/s, bench --workers ${run.threads} --mode lease ${lease.toFixed(0)} tasks/s`,
  );
});
