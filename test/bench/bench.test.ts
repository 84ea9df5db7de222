import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { environmentRows } from '#bench/environment.js';
import { fmaf, fmaSteps, ulpDistance } from '#bench/fmaf.js';
import { libraryVersion, packageVersion } from '#bench/package.js';
import { sampleIndices } from '#bench/reference.js';
import { formatReport } from '#bench/report.js';
import { timelineHtml, TIMELINE_SCHEMA } from '#bench/timeline.js';
import { parseBenchResults, PHASES, quantile } from '#bench/results.js';
import { repositoryRoot } from '../support/gpu.js';
import { syntheticResults } from './support/synthetic-results.js';

const f32 = (x: number) => Math.fround(x);

test('fmaf rounds the exact v*a + b once, where Math.fround(v * a + b) rounds twice and is one ulp off', () => {
  // The case from Note [exact fmaf]: the exact sum lies just below a float32 midpoint that float64 rounds onto.
  const v = f32(1 + 2 ** -23);
  const a = f32((1 - 2 ** -23) * 2 ** -24);
  const b = f32(1 + 2 ** -23);
  assert.equal(fmaf(v, a, b), 1 + 2 ** -23);
  assert.equal(Math.fround(v * a + b), 1 + 2 ** -22);
  // Mirrored: v*a = 2**-24 + 2**-60, so the exact sum lies just above the midpoint between 1 + 2**-22 (even) and
  // 1 + 3 * 2**-23; float64 drops the 2**-60 and ties-to-even then rounds down.
  const v2 = f32(1 + 2 ** -12);
  const a2 = f32((1 - 2 ** -12 + 2 ** -24) * 2 ** -24);
  const b2 = f32(1 + 2 ** -22);
  assert.equal(fmaf(v2, a2, b2), 1 + 3 * 2 ** -23);
  assert.equal(Math.fround(v2 * a2 + b2), 1 + 2 ** -22);
});

test('fmaf agrees with Math.fround where no double rounding can occur, subnormals included', () => {
  assert.equal(fmaf(f32(0.5), f32(0.25), f32(1)), 1.125);
  assert.equal(fmaf(2 ** -149, f32(0.5), 0), 0); // a tie at the smallest subnormal rounds to even (zero)
  assert.equal(fmaf(2 ** -149, f32(1.5), 0), 2 ** -148);
  assert.equal(fmaf(f32(3), f32(-1), f32(3)), 0);
  assert.equal(fmaSteps(f32(0.75), 0, f32(2), f32(1)), f32(0.75));
  assert.equal(fmaSteps(f32(0.75), 3, f32(2), f32(1)), f32(((0.75 * 2 + 1) * 2 + 1) * 2 + 1));
});

test('ulpDistance counts float32 steps across zero and treats NaN as infinitely far', () => {
  assert.equal(ulpDistance(1, 1), 0);
  assert.equal(ulpDistance(1, 1 + 2 ** -23), 1);
  assert.equal(ulpDistance(1, 1 - 2 ** -24), 1);
  assert.equal(ulpDistance(2 ** -149, -(2 ** -149)), 2);
  assert.equal(ulpDistance(0, -0), 0);
  assert.equal(ulpDistance(Number.NaN, 1), Number.POSITIVE_INFINITY);
});

test('sampleIndices spreads the sample from the first to the last element and includes the hook element', () => {
  const sample = sampleIndices(1_000_000);
  assert.equal(sample.length, 256);
  assert.equal(sample[0], 0);
  assert.equal(sample.at(-1), 999_999);
  assert.ok(sampleIndices(1_000_000, 4321).includes(4321));
  assert.deepEqual(sampleIndices(3), [0, 1, 2]);
  assert.deepEqual(sampleIndices(1), [0]);
});

test('quantile interpolates between neighbours of the sorted values', () => {
  assert.equal(quantile([1, 2, 3, 4], 0.5), 2.5);
  assert.equal(quantile([5], 0.99), 5);
  assert.ok(Number.isNaN(quantile([], 0.5)));
});

test('the environment names the library\'s version beside the benchmark\'s; a file saved before the library\'s was recorded still reads', () => {
  const version = (name: string) => (JSON.parse(readFileSync(path.join(repositoryRoot, 'packages', name, 'package.json'), 'utf8')) as { version: string }).version;
  assert.equal(libraryVersion(), version('cuda-stream-pool'));
  assert.equal(packageVersion(), version('cuda-stream-pool-bench'));

  const result = syntheticResults({ tasks: 2, modes: ['pool'] });
  result.environment.libraryVersion = '9.8.7';
  result.environment.packageVersion = '1.2.3';
  const rows = new Map(environmentRows(parseBenchResults(JSON.stringify(result), 'new.json').environment));
  assert.equal(rows.get('cuda-stream-pool'), '9.8.7');
  assert.equal(rows.get('cuda-stream-pool-bench'), '1.2.3');

  delete result.environment.libraryVersion;
  const older = parseBenchResults(JSON.stringify(result), 'older.json');
  assert.equal(older.environment.libraryVersion, undefined);
  assert.equal(new Map(environmentRows(older.environment)).get('cuda-stream-pool'), 'not recorded');
  assert.match(formatReport(older), /│ cuda-stream-pool +│ not recorded +│/);
  assert.match(formatReport(older), /│ cuda-stream-pool-bench +│ 1\.2\.3 +│/);
});

test('the environment says how stream work reached the driver; a file saved before that was recorded still reads', () => {
  const result = syntheticResults({ tasks: 2, modes: ['pool'] });
  result.environment.submission = { mode: 'deferred', threads: 2 };
  const rows = new Map(environmentRows(parseBenchResults(JSON.stringify(result), 'new.json').environment));
  assert.equal(rows.get('submission'), 'deferred (2 submission threads per JS thread issue what it records)');
  result.environment.submission = { mode: 'direct', threads: 0 };
  assert.equal(new Map(environmentRows(result.environment)).get('submission'), 'direct (each JS thread calls the driver)');
  delete result.environment.submission;
  const older = parseBenchResults(JSON.stringify(result), 'older.json');
  assert.equal(older.environment.submission, undefined);
  assert.match(formatReport(older), /│ submission +│ not recorded +│/);
  result.environment.submission = { mode: 'deferred', threads: 1 };
  assert.equal(new Map(environmentRows(result.environment)).get('submission'), 'deferred (1 submission thread per JS thread issues what it records)');
  for (const bad of [{ mode: 'queued', threads: 1 }, { mode: 'deferred', threads: 0 }, { mode: 'deferred', threads: 9 }, { mode: 'direct', threads: 3 }]) {
    result.environment.submission = bad as { mode: 'direct'; threads: 0 };
    assert.throws(() => parseBenchResults(JSON.stringify(result), 'bad.json'), /submission/, JSON.stringify(bad));
  }
});

test('the report lists order waits per mode in deferred mode, the --processes rows too, with the digits a rare wait needs', () => {
  const result = syntheticResults({ tasks: 2, modes: ['pool', 'graph'] });
  result.environment.submission = { mode: 'deferred', threads: 2 };
  result.modes[0]!.orderWaits = { perTask: 1 / 2560, msPerRun: 11.4 };
  result.modes[1]!.orderWaits = { perTask: 0.25, msPerRun: 3 };
  result.processModes = [{ ...result.modes[1]!, orderWaits: { perTask: 0.0039, msPerRun: 9.23 } }];
  const text = formatReport(parseBenchResults(JSON.stringify(result), 'deferred.json'));
  assert.match(text, /^ {4}pool: 0\.00039 \(one in 2,560 tasks\) per task, 11\.4 ms per run$/m);
  assert.match(text, /^ {4}graph: 0\.250 per task, 3\.0 ms per run$/m);
  assert.match(text, /^ {4}graph, 1 process: 0\.0039 \(one in 256 tasks\) per task, 9\.2 ms per run$/m);
  result.modes[0]!.orderWaits = { perTask: 1e-7, msPerRun: 0.5 };
  assert.match(formatReport(parseBenchResults(JSON.stringify(result), 'rare.json')), /^ {4}pool: 0\.00000010 \(one in 10,000,000 tasks\) per task, 0\.5 ms per run$/m);
  result.environment.submission = { mode: 'direct', threads: 0 };
  assert.doesNotMatch(formatReport(parseBenchResults(JSON.stringify(result), 'direct.json')), /Order waits/);
});

test('bench micro: in deferred submission a call that queues work has the recording target (150 ns), not its direct-mode ratio to the driver call', () => {
  // The submission mode is read once per process: each mode in a process of its own.
  const script = `
    const { targetUnlessRecorded, targetAddedNs } = await import('#bench/harness.js');
    const row = (median) => ({ name: 'event.record(stream)', unit: 'ns', value: { median, p10: median, p90: median }, baseline: { median: 140, p10: 140, p90: 140 }, baselineName: 'cuEventRecord', better: 'lower' });
    const rows = [120, 200, 260].map((ns) => targetUnlessRecorded(row(ns), (r) => targetAddedNs(r, 100)));
    console.log(JSON.stringify(rows.map((r) => [r.target, r.met])));`;
  const run = (mode: string) => {
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: repositoryRoot, encoding: 'utf8', env: { ...process.env, CUDA_STREAM_POOL_SUBMISSION: mode } });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout) as [string, boolean][];
  };
  const deferred = run('deferred');
  assert.deepEqual(deferred.map(([, met]) => met), [true, false, false]);
  assert.match(deferred[0]![0], /^≤ 150 ns \(deferred: the recording alone/);
  assert.deepEqual(run('direct'), [['≤ the baseline + 100 ns', true], ['≤ the baseline + 100 ns', true], ['≤ the baseline + 100 ns', false]]);
});

test('the timeline page embeds its data as parseable JSON, escapes text, and loads nothing from the network', () => {
  const result = syntheticResults({ tasks: 4, modes: ['pool', 'legacy'] });
  result.environment.device.name = 'Test <GPU>';
  result.modes[0]!.lastRunTasks![0]!.streamId = '7</script><b>';
  const html = timelineHtml(result);
  const json = /<script type="application\/json" id="timeline-data">([\s\S]*?)<\/script>/.exec(html);
  assert.ok(json);
  const data = JSON.parse(json[1]!);
  assert.equal(data.schema, TIMELINE_SCHEMA);
  assert.deepEqual(data.phases, PHASES);
  assert.deepEqual(data.modes.map((m: { mode: string }) => m.mode), ['pool', 'legacy']);
  const pool = data.modes[0];
  assert.equal(pool.rows.reduce((n: number, row: { tasks: number[] }) => n + row.tasks.length, 0), 4);
  assert.ok(pool.rows.some((row: { streamId: string }) => row.streamId === '7</script><b>'), 'the stream id survives the embedding');
  assert.ok(!html.includes('<b>') && !html.includes('Test <GPU>'), 'labels and names are escaped');
  assert.doesNotMatch(html, /<script[^>]+src=|<link[^>]+href=|@import|url\(http/i);
});

test('a mode without phase times gets a section with its figures and a note, and no canvas', () => {
  const result = syntheticResults({ tasks: 4, modes: ['pool', 'lease'] });
  result.modes[1]!.lastRunTasks = null;
  const html = timelineHtml(result);
  assert.match(html, /<section data-mode="lease"><h2>lease<\/h2>[\s\S]*?No phase times were recorded/);
  assert.equal((html.match(/<canvas /g) ?? []).length, 1);
});
