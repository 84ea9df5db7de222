// Runs every suite in dist/test with node:test, one file at a time (each GPU file is its own CUDA context).
//   node dist/test/support/run-tests.js         skips allowed, reasons printed (CI without a GPU)
//   node dist/test/support/run-tests.js --gpu   any skip fails the run (the GPU machine), except a multi-device
//                                               test's "needs N GPUs" while fewer than N are visible
//   node dist/test/support/run-tests.js --sim   the suites that use a GPU (every area but cpu/ and native/, which
//                                               never do) on the simulated driver (scripts/simulated-driver.cc,
//                                               built here) with two devices; any skip fails the run except those
//                                               of tests the simulator cannot run (test/support/gpu.ts, notSimulated),
//                                               which are listed by reason at the end
// Extra arguments are test file name filters (substrings).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { sortSkips, tapSkipLines } from './skips.js';

const testDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
// A misspelt flag would otherwise run the suite in another tier and pass.
for (const flag of args.filter((a) => a.startsWith('--') && a !== '--sim' && a !== '--gpu')) {
  console.error(`unknown option ${flag}: run-tests.js takes --gpu or --sim, and test file name filters`);
  process.exit(64);
}
const simulated = args.includes('--sim');
const noSkips = simulated || args.includes('--gpu');
const filters = args.filter((a) => !a.startsWith('--'));
if (simulated && args.includes('--gpu')) {
  console.error('--gpu and --sim cannot be combined: --sim runs on the simulated driver, --gpu on the real one');
  process.exit(64);
}
if (simulated) {
  // Before anything loads the library: the test processes, and this one, open the simulated driver.
  const { simulatedDriver } = await import('./simulated-driver.js');
  process.env.CUDA_STREAM_POOL_LIBCUDA = simulatedDriver();
  // Two devices, so that the multi-device tests run too.
  process.env.SIMULATED_DRIVER_DEVICES = '2';
}

/** The areas of test/ whose suites never touch a GPU: the sim tier leaves them out, as they would run the same. */
const cpuOnlyAreas = new Set(['cpu', 'native']);

function findTests(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name === 'support' || (simulated && dir === testDir && cpuOnlyAreas.has(entry.name))) return [];
      return findTests(full);
    }
    return entry.name.endsWith('.test.js') ? [full] : [];
  });
}

const files = findTests(testDir)
  // Matched against the path from the build's root (test/gpu/kernel/kernel.test.js), not the checkout's own folders.
  .filter((f) => filters.length === 0 || filters.some((s) => path.relative(path.dirname(testDir), f).includes(s)))
  .sort();
if (files.length === 0) {
  console.error(`no test files match ${filters.join(', ')}`);
  process.exit(1);
}
const { cuda, Device } = await import('cuda-stream-pool');
if (!cuda.available) console.log(`No usable CUDA GPU, so GPU tests skip: ${cuda.unavailableReason}\n`);
if (simulated && cuda.available) console.log(`On the simulated driver (${process.env.CUDA_STREAM_POOL_LIBCUDA}): ${Device.count()} devices, ${Device.get(0).name}\n`);
const scratch = mkdtempSync(path.join(os.tmpdir(), 'csp-tests-'));
const tap = path.join(scratch, 'report.tap');
const result = spawnSync(
  process.execPath,
  [
    '--expose-gc',
    '--test',
    '--test-concurrency=1',
    // A hung test fails with a timeout instead of stalling the whole run (and the GPU machine's time). The limit is
    // also each file's: on the simulated driver the CPU does the GPU's work, so a file of benchmark runs takes longer.
    `--test-timeout=${simulated ? 300_000 : 120_000}`,
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
const skips = tapSkipLines(report);
// A multi-device test skips with "needs N GPUs" (test/support/gpu.ts); on a machine with fewer than N that skip is
// accepted, as is a test that needs no driver at all where a GPU (so a driver) is there; every other skip fails --gpu.
const visible = Device.count();
const { tooFewDevices, driverInstalled, simulator, other: otherSkips } = sortSkips(skips, visible, simulated);
const notSimulated = [...simulator.values()].reduce((sum, names) => sum + names.length, 0);
const accepted = [
  tooFewDevices.length > 0 && `${tooFewDevices.length} of them need more GPUs than the ${visible} visible`,
  driverInstalled.length > 0 && `${driverInstalled.length} need${driverInstalled.length === 1 ? 's' : ''} a machine without a CUDA driver`,
  notSimulated > 0 && `${notSimulated} cannot run under the simulated driver`,
].filter(Boolean);
if (simulator.size > 0) {
  console.log(`\nNot run under the simulated driver (test/support/gpu.ts, notSimulated), by reason:`);
  for (const [reason, names] of [...simulator].sort(([a], [b]) => a.localeCompare(b))) console.log(`  ${reason} (${names.length}):\n    ${names.join('\n    ')}`);
}
console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped${accepted.length > 0 ? ` (${accepted.join('; ')})` : ''}`);
if (noSkips && otherSkips.length > 0) {
  console.error(`${simulated ? '--sim' : '--gpu'}: ${otherSkips.length} test(s) skipped, which fails this run:\n  ${otherSkips.join('\n  ')}`);
  process.exit(1);
}
process.exit(result.status === 0 && failed === 0 ? 0 : 1);
