// The benchmark addon (cuda_stream_pool_bench.node): a binary of its own, found by explicit path, never by the
// library's loader; it loads without a GPU and reports why through the library's error classes.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';

import { benchAddon, BENCH_ADDON_TARGET } from '#bench/bench-addon.js';
import { addonPath, native, packageRoot } from '#library/binding/binding.js';
import { runChild } from '../support/child.js';
import { gpu } from '../support/gpu.js';
import { benchDist, benchRoot, libraryRoot } from '../support/paths.js';

function scratchRoot(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'csp-bench-addon-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('addonPath() finds a package\'s addon in build/Release first, then where node-gyp-build puts its prebuild', (t) => {
  const root = scratchRoot(t);
  assert.equal(addonPath(BENCH_ADDON_TARGET, root), undefined);
  const prebuilds = path.join(root, 'prebuilds', `${process.platform}-${process.arch}`);
  mkdirSync(prebuilds, { recursive: true });
  writeFileSync(path.join(prebuilds, 'node.napi.glibc.node'), '');
  assert.equal(addonPath(BENCH_ADDON_TARGET, root), path.join(prebuilds, 'node.napi.glibc.node'));
  const release = path.join(root, 'build', 'Release');
  mkdirSync(release, { recursive: true });
  writeFileSync(path.join(release, `${BENCH_ADDON_TARGET}.node`), '');
  assert.equal(addonPath(BENCH_ADDON_TARGET, root), path.join(release, `${BENCH_ADDON_TARGET}.node`));
});

test('each package loads its own binary, and the library\'s exports none of the benchmark functions', () => {
  const found = addonPath(BENCH_ADDON_TARGET, benchRoot);
  assert.ok(found, 'the benchmark addon is built');
  assert.ok(found.startsWith(benchRoot + path.sep), found);
  const nodeGypBuild = createRequire(import.meta.url)('node-gyp-build') as { resolve(dir: string): string };
  const library = nodeGypBuild.resolve(packageRoot);
  assert.ok(path.resolve(library).startsWith(realpathSync(libraryRoot) + path.sep), library);
  assert.doesNotMatch(path.basename(library), /bench/);
  const benchFunctions = Object.keys(benchAddon()).filter((name) => name !== 'setErrorFactory');
  assert.ok(benchFunctions.includes('runTasks') && benchFunctions.includes('streamCreateDestroyLoop'), benchFunctions.join(', '));
  const shared = benchFunctions.filter((name) => name in native);
  assert.deepEqual(shared, [], 'the library binary carries no benchmark code');
  assert.deepEqual(Object.keys(native).filter((name) => /^bench/.test(name)), []);
});

test('without a driver the benchmark addon loads, its calls throw CudaUnavailableError and runTasks rejects with it', async () => {
  const addonUrl = pathToFileURL(path.join(benchDist, 'bench-addon.js')).href;
  const result = await runChild(
    `
    import { CudaUnavailableError } from 'cuda-stream-pool';
    const { benchAddon } = await import(${JSON.stringify(addonUrl)});
    const addon = benchAddon();
    const describe = (e) => (e instanceof CudaUnavailableError ? e.name + ': ' + e.message : 'wrong: ' + e);
    const errors = [];
    const bytes = new Uint8Array(16);
    for (const call of [
      () => addon.streamCreateDestroyLoop(0, 10),
      () => addon.streamSynchronizeIdleLoop(0, 10),
      () => addon.kernelSynchronizeLoop(0, 10, '.version 8.0'),
      () => addon.eventRecordLoop(0, 10),
      () => addon.launchLoop(0, 10, '.version 8.0', 'empty_kernel', 1n, new Uint8Array(0), 0),
      () => addon.copyLoop(0, 10, true, bytes, 16),
      () => addon.allocFreeLoop(0, 10, 16),
      () => addon.graphLaunchLoop(0, 10, '.version 8.0', 16),
    ]) {
      try { call(); errors.push('no error'); } catch (e) { errors.push(describe(e)); }
    }
    const plan = { device: 0, ptx: '.version 8.0', elements: 4, intensity: 1, grid: 1, block: 4, a: 1, b: 0,
      partitions: [bytes], slots: [{ memory: 1n, output: bytes }], sample: Uint32Array.of(0, 3),
      references: new Float32Array(2), ulpTolerance: 4, first: 0, count: 1, corruptTask: -1, corruptElement: 0, marks: false };
    try { await addon.runTasks(plan); errors.push('no rejection'); } catch (e) { errors.push(describe(e)); }
    console.log(JSON.stringify(errors));
  `,
    { CUDA_STREAM_POOL_LIBCUDA: '/nonexistent/libcuda.so.1' },
  );
  assert.equal(result.code, 0, result.stderr);
  assert.equal(result.signal, null);
  const errors = JSON.parse(result.stdout) as string[];
  assert.equal(errors.length, 9);
  for (const line of errors) assert.match(line, /^CudaUnavailableError: CUDA is not available: tried to open .*\/nonexistent\/libcuda\.so\.1/);
});

test('native mode runs every task once on one stream per slot, with phase marks in order, and verifies the output', gpu, async (t) => {
  const { BatchThread } = await import('#bench/batch.js');
  const { computeReferences, sampleIndices } = await import('#bench/reference.js');
  const { VerificationError } = await import('#bench/task.js');
  const spec = { elements: 4096, intensity: 16, partitions: 4, sample: sampleIndices(4096) };
  const thread = await BatchThread.create({ device: 0, spec, references: computeReferences(spec), slots: 4, corrupt: undefined, marks: true, thread: 0 });
  t.after(() => thread.dispose());
  const result = await thread.run('native', 100, 24, true);
  assert.deepEqual(result.records.map((record) => record.task).sort((a, b) => a - b), Array.from({ length: 24 }, (_, i) => 100 + i));
  const streams = new Set(result.records.map((record) => record.streamId));
  assert.ok(streams.size >= 1 && streams.size <= 4, `${streams.size} streams for 4 slots`);
  assert.ok(result.endEpochMs > result.startEpochMs && result.startEpochMs >= result.originEpochMs);
  for (const record of result.records) {
    assert.ok(record.latencyMs > 0, `task ${record.task} latency ${record.latencyMs}`);
    assert.ok(record.marks[0] > 0, `task ${record.task} starts after the origin: ${record.marks.join(', ')}`);
    for (let k = 1; k < 4; k++) assert.ok(record.marks[k]! >= record.marks[k - 1]!, `task ${record.task} marks in order: ${record.marks.join(', ')}`);
  }
  // The corruption hook reaches the native threads too: a timed task with a corrupted element fails verification.
  const element = spec.sample[100]!;
  thread.ctx.corrupt = { task: 107, element };
  await assert.rejects(thread.run('native', 100, 24, true), (error: unknown) => {
    assert.ok(error instanceof VerificationError);
    assert.equal(error.task, 107);
    assert.equal(error.element, element);
    assert.equal(error.mode, 'native');
    return true;
  });
});
