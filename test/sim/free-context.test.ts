// A free of a buffer used on two devices' streams meets a failed cuCtxSetCurrent: the free reports the driver's own
// result, and the next free of such a buffer works. Found by the fault sweep (test/fault-sweep): when making the
// buffer's device current again failed, the device's library stream was made in the other device's context, and
// every later free through it failed with CUDA_ERROR_INVALID_CONTEXT from cuStreamWaitEvent.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { needsCompiler, runSimulated, simulatedJson } from '../support/simulated-driver.js';

// The script: two buffers of device 0 each used on device 1's stream (so a free goes through device 0's library
// stream), freed one after the other; `upTo` stops it before or after the first free.
const script = (upTo: 'before' | 'after' | 'end') => `
  import { DeviceBuffer, Stream } from 'cuda-stream-pool';
  const s0 = Stream.create({ device: 0 });
  const s1 = Stream.create({ device: 1 });
  const make = () => {
    const a = DeviceBuffer.alloc(4096, { stream: s0 });
    const b = DeviceBuffer.alloc(4096, { stream: s1 });
    s1.copy(b, a); // a is used on device 1's stream: its free goes through device 0's library stream
    return [a, b];
  };
  const [a, b] = make();
  const [c, d] = make();
  // The copies done before anything else, through a timer: a wait could make context calls of its own, and an exit
  // with work still queued is another test's business.
  await new Promise((resolve) => setTimeout(resolve, 50));
  if (${JSON.stringify(upTo)} === 'before') process.exit(0);
  let first = 'freed';
  try { a.free(); } catch (e) { first = e.code + ' ' + e.call; }
  if (${JSON.stringify(upTo)} === 'after') process.exit(0);
  let second = 'freed';
  try { c.free(); } catch (e) { second = e.code + ' ' + e.call; }
  b.free();
  d.free();
  await Promise.all([s0.synchronize(), s1.synchronize()]);
  s0.destroy();
  s1.destroy();
  console.log(JSON.stringify({ first, second }));`;

const options = { devices: 2, operationDelayUs: 100 };

/** This thread's cuCtxSetCurrent calls once the script stopped where `upTo` says. */
async function contextCalls(upTo: 'before' | 'after'): Promise<number> {
  const directory = mkdtempSync(path.join(os.tmpdir(), 'csp-free-context-'));
  try {
    const file = path.join(directory, 'counts.json');
    const result = await runSimulated(script(upTo), { ...options, env: { SIMULATED_DRIVER_COUNTS: file } });
    assert.equal(result.code, 0, result.stderr);
    const counts = JSON.parse(readFileSync(file, 'utf8')) as Record<string, Record<string, number>>;
    return counts['main/1']?.cuCtxSetCurrent ?? 0;
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}

test('a free whose cuCtxSetCurrent calls fail, each in turn: the next free of such a buffer works, and a failure the free cannot do without is thrown', needsCompiler, async () => {
  // Counted, not written down: how many calls come before the free depends on what the library does first.
  const before = await contextCalls('before');
  const after = await contextCalls('after');
  assert.ok(after - before >= 2, `the free makes device 0 current and visits device 1; it made ${after - before} calls`);
  const outcomes: string[] = [];
  for (let call = before + 1; call <= after; call++) {
    const result = await simulatedJson<{ first: string; second: string }>(script('end'), { ...options, fail: `cuCtxSetCurrent:${call}=CUDA_ERROR_OUT_OF_MEMORY` });
    assert.equal(result.second, 'freed', `cuCtxSetCurrent call ${call} failed in the first free; the second free said ${result.second}`);
    assert.match(result.first, /^(freed|CUDA_ERROR_OUT_OF_MEMORY cuCtxSetCurrent)$/, `call ${call}`);
    outcomes.push(result.first);
  }
  assert.ok(outcomes.includes('CUDA_ERROR_OUT_OF_MEMORY cuCtxSetCurrent'), `some failure is the free's to report: ${outcomes.join(', ')}`);
});
