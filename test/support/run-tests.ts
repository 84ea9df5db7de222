// Runs every suite in dist/test with node:test, one file at a time (each GPU file is its own CUDA context).
//   node dist/test/support/run-tests.js         skips allowed, reasons printed (CI without a GPU)
//   node dist/test/support/run-tests.js --gpu   any skip fails the run (the GPU machine), except a multi-device
//                                               test's "needs N GPUs" while fewer than N are visible
// Extra arguments are test file name filters (substrings).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { sortSkips } from './skips.js';

const testDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const noSkips = args.includes('--gpu');
const filters = args.filter((a) => !a.startsWith('--'));

function findTests(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'support' ? [] : findTests(full);
    return entry.name.endsWith('.test.js') ? [full] : [];
  });
}

const files = findTests(testDir)
  .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
  .sort();
if (files.length === 0) {
  console.error(`no test files match ${filters.join(', ')}`);
  process.exit(1);
}
const { cuda, Device } = await import('cuda-stream-pool');
if (!cuda.available) console.log(`No usable CUDA GPU: GPU tests skip. ${cuda.unavailableReason}\n`);
const scratch = mkdtempSync(path.join(os.tmpdir(), 'csp-tests-'));
const tap = path.join(scratch, 'report.tap');
const result = spawnSync(
  process.execPath,
  [
    '--expose-gc',
    '--test',
    '--test-concurrency=1',
    // A hung test fails with a timeout instead of stalling the whole run (and the GPU machine's time).
    '--test-timeout=120000',
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    '--test-reporter=tap',
    `--test-reporter-destination=${tap}`,
    ...files,
  ],
  // Every test process checks the native layer's lock order and aborts on the first violation.
  { stdio: 'inherit', env: { ...process.env, CUDA_STREAM_POOL_CHECK_LOCK_ORDER: process.env.CUDA_STREAM_POOL_CHECK_LOCK_ORDER ?? '1' } },
);
const report = readFileSync(tap, 'utf8');
rmSync(scratch, { recursive: true, force: true });
const count = (name: string) => Number(report.match(new RegExp(`^# ${name} (\\d+)$`, 'm'))?.[1] ?? 0);
const passed = count('pass');
const failed = count('fail');
const skipped = count('skipped');
const skips = report.split('\n').filter((line) => /# SKIP/.test(line)).map((line) => line.trim());
// A multi-device test skips with "needs N GPUs" (test/support/gpu.ts); on a machine with fewer than N that is the one
// skip --gpu accepts, so single-GPU runs stay green while every other skip still fails them.
const visible = Device.count();
const { tooFewDevices, other: otherSkips } = sortSkips(skips, visible);
const accepted = tooFewDevices.length > 0 ? ` (${tooFewDevices.length} of them need more GPUs than the ${visible} visible)` : '';
console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped${accepted}`);
if (noSkips && otherSkips.length > 0) {
  console.error(`--gpu: ${otherSkips.length} test(s) skipped, which fails this run:\n  ${otherSkips.join('\n  ')}`);
  process.exit(1);
}
process.exit(result.status === 0 && failed === 0 ? 0 : 1);
