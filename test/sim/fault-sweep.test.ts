// The fault sweep's runner (test/sim/fault-sweep/sweep.ts) on a small slice, so that `npm test` keeps it working: one
// workload, one entry point, every action. The whole sweep is `npm run fault-sweep`.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { repositoryRoot } from '../support/gpu.js';
import { needsCompiler, simulatedDriver } from '../support/simulated-driver.js';

test('the fault sweep fails each kernel launch of the kernels workload three ways and finds nothing', needsCompiler, async () => {
  const folder = mkdtempSync(path.join(os.tmpdir(), 'csp-fault-sweep-test-'));
  try {
    const json = path.join(folder, 'sweep.json');
    const args = ['dist/test/sim/fault-sweep/sweep.js', '--workload', 'kernels', '--entry', 'cuLaunchKernel', '--json', json];
    const child = spawn(process.execPath, args, {
      cwd: repositoryRoot,
      env: { ...process.env, FAULT_SWEEP_LIBCUDA: simulatedDriver() },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.equal(code, 0, output);
    const result = JSON.parse(readFileSync(json, 'utf8')) as { runs: number; reached: number; findings: string[]; verdicts: { case: { action: string } }[] };
    assert.deepEqual(result.findings, []);
    assert.equal(result.reached, result.runs);
    assert.deepEqual([...new Set(result.verdicts.map((v) => v.case.action))].sort(), ['fail', 'fault', 'lost']);
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
});
