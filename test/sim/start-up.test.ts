// The calls the library makes once per process, to open the driver (cuDriverGetVersion, cuGetProcAddress for every
// entry point, cuInit, cuDeviceGetCount), each failed in a process of its own on the simulated driver: CUDA is then
// unavailable with a reason naming what failed, and nothing crashes; an optional entry point that cannot be resolved
// only turns its feature off.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { repositoryRoot } from '../support/gpu.js';
import { needsCompiler, runSimulated } from '../support/simulated-driver.js';

const report = `
  import { cuda, Device } from 'cuda-stream-pool';
  console.log(JSON.stringify({ available: cuda.available, reason: cuda.unavailableReason ?? null, count: Device.count() }));`;

interface Outcome {
  available: boolean;
  reason: string | null;
  count: number;
}

async function startWith(fail: string): Promise<Outcome> {
  const result = await runSimulated(report, { fail });
  assert.equal(result.code, 0, `${fail}: exit ${result.code} ${result.signal ?? ''}\n${result.stderr}`);
  return JSON.parse(result.stdout.trim()) as Outcome;
}

// The entry points the loader resolves, required ones first, in its order (packages/cuda-stream-pool/src/internal/loader.h).
function entryPoints(list: string): string[] {
  const loader = readFileSync(path.join(repositoryRoot, 'packages', 'cuda-stream-pool', 'src', 'internal', 'loader.h'), 'utf8');
  const body = loader.split(`#define ${list}(X)`)[1]!.split('\n\n')[0]!.split('//')[0]!;
  return [...body.matchAll(/X\((cu\w+),/g)].map((m) => m[1]!);
}

for (const [fail, reason] of [
  ['cuDriverGetVersion:1=CUDA_ERROR_UNKNOWN', /has no working cuDriverGetVersion/],
  ['cuInit:1=CUDA_ERROR_NO_DEVICE', /cuInit failed with CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected/],
  ['cuInit:1=CUDA_ERROR_OUT_OF_MEMORY', /cuInit failed with CUDA_ERROR_OUT_OF_MEMORY/],
  ['cuInit:1=1000', /cuInit failed with CUresult 1000: the driver has no description of this code\. Check/],
  ['cuDeviceGetCount:1=CUDA_ERROR_UNKNOWN', /reports no usable device/],
] as const) {
  test(`a failed start-up call (${fail}) leaves cuda.available false with the reason`, needsCompiler, async () => {
    const outcome = await startWith(fail);
    assert.equal(outcome.available, false);
    assert.equal(outcome.count, 0);
    assert.match(outcome.reason!, reason);
  });
}

test('cuGetProcAddress failing for each entry point in turn: a required one makes CUDA unavailable naming it, an optional one does not', needsCompiler, async () => {
  const required = entryPoints('CSP_DRIVER_FUNCTIONS');
  const optional = entryPoints('CSP_OPTIONAL_DRIVER_FUNCTIONS');
  assert.ok(required.length > 50 && optional.length > 0);
  const all = [...required, ...optional];
  const outcomes: Outcome[] = [];
  // Two at a time: each is a process of its own.
  for (let k = 0; k < all.length; k += 2) {
    const batch = all.slice(k, k + 2).map((_, i) => startWith(`cuGetProcAddress_v2:${k + i + 1}=CUDA_ERROR_NOT_FOUND`));
    outcomes.push(...(await Promise.all(batch)));
  }
  for (const [i, name] of required.entries()) {
    assert.equal(outcomes[i]!.available, false, name);
    assert.match(outcomes[i]!.reason!, new RegExp(`lacks entry points ${name}\\. Update the NVIDIA driver\\.$`), name);
  }
  for (const [i, name] of optional.entries()) assert.equal(outcomes[required.length + i]!.available, true, name);
  // One call beyond the last resolution fails nothing at start-up.
  assert.equal((await startWith(`cuGetProcAddress_v2:${all.length + 1}=CUDA_ERROR_NOT_FOUND`)).available, true);
});
