// bench micro's steady-state measurement (Note [steady state] in packages/cuda-stream-pool-bench/src/harness.ts) and how its report shows the
// calls per run; plain JS, no driver.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { steadyAsync, steadySync, steadySyncBeside } from '#bench/harness.js';
import { formatMicroReport } from '#bench/micro.js';
import { MICRO_SCHEMA, type MicroReport } from '#bench/schema.js';

test('steadySync grows a run until it lasts at least 5 ms and reports the calls per run', () => {
  let total = 0;
  let sink = 0;
  const sample = steadySync((calls) => {
    total += calls;
    for (let i = 0; i < calls; i++) sink += Math.sqrt(i);
  }, { minCalls: 10, runs: 5 });
  assert.ok(sink > 0);
  assert.equal(sample.runs, 5);
  assert.ok(Number.isInteger(sample.callsPerRun) && sample.callsPerRun! > 10, `calls per run ${sample.callsPerRun}`);
  // The size comes from the warm-up's runs; the JIT or a loaded machine can make the measured runs several times
  // faster than those (0.61 ms in one CI run), so the bound is loose: a run far longer than the 10-call minimum.
  assert.ok(sample.median * sample.callsPerRun! >= 5e6 / 16, `a measured run lasted ${(sample.median * sample.callsPerRun!) / 1e6} ms`);
  assert.ok(total >= sample.callsPerRun! * (5 + 3), 'warm-up runs and the measured runs all ran at the final size at least');
});

test('steadySync keeps a loop slower than 5 ms per call at the minimum, and warm-up ends for a loop that never settles', () => {
  let runs = 0;
  const sample = steadySync((calls) => {
    runs++;
    const until = process.hrtime.bigint() + BigInt(calls) * 6_000_000n;
    while (process.hrtime.bigint() < until); // 6 ms a call
  }, { minCalls: 1, runs: 3 });
  assert.equal(sample.callsPerRun, 1);
  assert.ok(sample.median >= 6e6, `${sample.median} ns per call`);
  // 250 ms of uncounted warm-up (about 42 runs of 6 ms), 20 rounds of 3 runs, the 3 measured runs.
  assert.ok(runs <= Math.ceil(250 / 6) + 3 + 3 * 20 + 3, `${runs} runs: the warm-up is bounded`);
});

test('steadySync does not settle a loop capped at few calls per run before it has made 20,000 calls or run 250 ms', () => {
  // Slow for its first 5,000 calls (100 ms of spinning by the clock, so also on a loaded machine), as an interpreted
  // loop is before V8 optimizes it, and steady at both speeds: without the rule it settles on the slow figure.
  let made = 0;
  const spin = (ns: number): void => {
    const until = process.hrtime.bigint() + BigInt(ns);
    while (process.hrtime.bigint() < until);
  };
  const sample = steadySync((calls) => {
    for (let i = 0; i < calls; i++) spin(made++ < 5000 ? 20_000 : 2_000);
  }, { minCalls: 200, maxCalls: 200, runs: 5 });
  assert.equal(sample.callsPerRun, 200);
  assert.ok(sample.median < 10_000, `${sample.median} ns per call after ${made} calls: measured before the loop got fast`);
});

test('steadyAsync measures an awaiting loop the same way', async () => {
  const sample = await steadyAsync(async (calls) => {
    for (let i = 0; i < calls; i++) await null;
  }, { minCalls: 1000, runs: 3 });
  assert.ok(sample.callsPerRun! >= 1000 && sample.median > 0);
});

test('steadySyncBeside runs the baseline after each measured run, with its calls, so that the two take turns', () => {
  const order: string[] = [];
  let sink = 0;
  const { library, native } = steadySyncBeside(
    (calls) => {
      order.push(`loop ${calls}`);
      for (let i = 0; i < calls; i++) sink += Math.sqrt(i);
    },
    (calls) => {
      order.push(`baseline ${calls}`);
      return 1000 + calls; // ns per call, as the addon's loops report
    },
    { minCalls: 10, runs: 4, between: () => order.push('between') },
  );
  assert.ok(sink > 0);
  const calls = library.callsPerRun!;
  // The warm-up runs the loop alone; the four measured runs each have the baseline right after, at the same size.
  const measured = order.slice(order.length - 16);
  assert.deepEqual(measured, Array.from({ length: 4 }, () => ['between', `loop ${calls}`, 'between', `baseline ${calls}`]).flat());
  assert.ok(!order.slice(0, order.length - 16).some((entry) => entry.startsWith('baseline')), 'no baseline run during the warm-up');
  assert.deepEqual({ median: native.median, runs: native.runs, callsPerRun: native.callsPerRun }, { median: 1000 + calls, runs: 4, callsPerRun: calls });
});

test('the micro report is schema 2 and shows each row\'s calls per run, a dash where there is none', () => {
  assert.equal(MICRO_SCHEMA, 'cuda-stream-pool/bench-micro/2');
  const environment = {
    date: '2026-12-02T00:00:00.000Z',
    packageVersion: '0.0.0',
    node: process.version,
    os: 'linux',
    cpu: 'a CPU',
    driverVersion: null,
    device: { ordinal: 0, name: 'a device', computeCapability: '9.0', multiprocessorCount: 1, totalMemoryBytes: 2 ** 30, asyncEngineCount: 1 },
  };
  const report: MicroReport = {
    schema: MICRO_SCHEMA,
    environment,
    groups: [
      {
        name: 'pool',
        status: 'ok',
        results: [
          { name: 'pool.tryAcquire() + lease.release()', unit: 'ns', value: { median: 52.5, p10: 50, p90: 55, runs: 9, callsPerRun: 113630 } },
          { name: 'CPU of an idle process', unit: '%', value: { median: 0.5, p10: 0.4, p90: 0.6, runs: 3 } },
        ],
      },
    ],
  };
  const lines = formatMicroReport(report).split('\n');
  const header = lines.find((line) => line.includes('benchmark'))!;
  assert.match(header, /p10-p90\s*│\s*calls\/run\s*│/);
  assert.match(lines.find((line) => line.includes('tryAcquire'))!, /│\s*113630\s*│/);
  assert.match(lines.find((line) => line.includes('idle process'))!, /│\s*-\s*│/);
});
