// The simulated driver's own configuration: a malformed failure rule or value ends the process with code 70 and a
// line naming what is wrong (a rule that could never fire is refused, not ignored), and SIMULATED_DRIVER_TRACE alone
// lists the threads that call the driver, with the names rules use.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, runSimulated } from '../support/simulated-driver.js';

const touch = `import { Event } from 'cuda-stream-pool'; Event.create(); console.log('ran');`;

for (const [setting, message] of [
  [{ fail: 'cuEventCreate:1x=CUDA_ERROR_UNKNOWN' }, /'cuEventCreate:1x=CUDA_ERROR_UNKNOWN' needs a call number and thread number from 1, in digits/],
  [{ fail: 'cuEventCreate:-1=2' }, /needs a call number and thread number from 1, in digits/],
  [{ fail: 'cuEventCreate@main/2x:1=2' }, /needs a call number and thread number from 1, in digits/],
  [{ fail: 'cuEventCreate@:1=2' }, /names no thread/],
  [{ fail: 'cuEventCreate:1=CUDA_SUCCESS' }, /'CUDA_SUCCESS' is not the name or number of a failure/],
  [{ fail: 'cuEventCreate:1=lost' }, /cuEventCreate queues no work, so it cannot fault or be lost/],
  [{ fail: 'cuEventCreate:1=stall:0' }, /'cuEventCreate:1=stall:0': a stall takes a whole number of milliseconds from 1 to 60000/],
  [{ fail: 'cuLaunchKernel:1=stall:60001' }, /a stall takes a whole number of milliseconds from 1 to 60000/],
  [{ fail: 'cuEventRecord:1=late:0' }, /'cuEventRecord:1=late:0': a late return takes a whole number of milliseconds from 1 to 60000/],
  [{ fail: 'operation:1=stall:5' }, /`operation` cannot stall or return late \(name the entry point that should\)/],
  [{ fail: 'operation:1=late:5' }, /`operation` cannot stall or return late/],
  [{ fail: 'operation@any:2=CUDA_ERROR_OUT_OF_MEMORY' }, /`operation` takes fault:<CUresult> or lost \(to fail a call, name its entry point\)/],
  [{ fail: 'cuEventCreat:1=2' }, /'cuEventCreat' is not an entry point it simulates/],
  [{ fail: 'cuEventCreate=2' }, /is not <entry point>\[@<thread>\[\/<n>\]\]:<k>\[\+\]=<action>/],
  [{ devices: 0 }, /SIMULATED_DRIVER_DEVICES=0: simulate at least one device/],
  [{ env: { SIMULATED_DRIVER_DEVICES: '65' } }, /SIMULATED_DRIVER_DEVICES='65' is not a whole number from 1 to 64/],
  // Read at start-up, also where nothing would use them (no kernel, no copy), and refused from any thread with 70.
  [{ env: { SIMULATED_DRIVER_CONCURRENT_KERNELS: 'abc' } }, /SIMULATED_DRIVER_CONCURRENT_KERNELS='abc' is not a whole number from 1 to 1024/],
  [{ env: { SIMULATED_DRIVER_CONCURRENT_KERNELS: '0' } }, /SIMULATED_DRIVER_CONCURRENT_KERNELS=0: at least one kernel must be able to run/],
  [{ env: { SIMULATED_DRIVER_COPY_BYTES_PER_US: 'fast' } }, /SIMULATED_DRIVER_COPY_BYTES_PER_US='fast' is not a whole number from 0 to/],
  [{ env: { SIMULATED_DRIVER_OPERATION_DELAY_US: '20000000' } }, /SIMULATED_DRIVER_OPERATION_DELAY_US='20000000' is not a whole number from 0 to 10000000/],
  [{ env: { SIMULATED_DRIVER_COUNTS: '/nonexistent/folder/counts.json' } }, /SIMULATED_DRIVER_COUNTS: cannot write '\/nonexistent\/folder\/counts.json'/],
  [{ env: { SIMULATED_DRIVER_TRACE: 'yes' } }, /SIMULATED_DRIVER_TRACE='yes' is neither 1 nor 0/],
  [{ env: { SIMULATED_DRIVER_NO_LAUNCH_ATTRIBUTES: 'true' } }, /SIMULATED_DRIVER_NO_LAUNCH_ATTRIBUTES='true' is neither 1 nor 0/],
  [{ env: { SIMULATED_DRIVER_NO_HOST_POINTER_FOR_REGISTERED_MEMORY: 'yes' } }, /SIMULATED_DRIVER_NO_HOST_POINTER_FOR_REGISTERED_MEMORY='yes' is neither 1 nor 0/],
  [{ env: { SIMULATED_DRIVER_VERSION: '11080' } }, /SIMULATED_DRIVER_VERSION='11080' is not a whole number from 12000 to 13010/],
  [{ env: { SIMULATED_DRIVER_VERSION: '13020' } }, /SIMULATED_DRIVER_VERSION='13020' is not a whole number from 12000 to 13010/],
] as const) {
  test(`${JSON.stringify(setting)} ends the process with code 70 saying what is wrong`, needsCompiler, async () => {
    const result = await runSimulated(touch, setting);
    assert.equal(result.code, 70, result.stderr);
    assert.match(result.stderr, message);
    assert.doesNotMatch(result.stdout, /ran/);
  });
}

test('SIMULATED_DRIVER_TRACE=1 alone names each thread that calls the driver', needsCompiler, async () => {
  const result = await runSimulated(
    `import { DeviceBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     const buffer = DeviceBuffer.alloc(64, { stream });
     for (let i = 0; i < 20; i++) stream.fill(buffer, i); // pending, so the wait goes through the poller
     await stream.synchronize();`,
    { env: { SIMULATED_DRIVER_TRACE: '1' }, operationDelayUs: 1000 },
  );
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stderr, /simulated driver: thread main\/1 calls the driver/);
  assert.match(result.stderr, /simulated driver: thread csp-poller\/1 calls the driver/);
});

test('SIMULATED_DRIVER_COUNTS writes each thread\'s calls per entry point at exit, also beside failure rules', needsCompiler, async (t) => {
  const { mkdtempSync, readFileSync, rmSync } = await import('node:fs');
  const os = await import('node:os');
  const path = await import('node:path');
  const folder = mkdtempSync(path.join(os.tmpdir(), 'csp-counts-'));
  t.after(() => rmSync(folder, { recursive: true, force: true }));
  const source = `import { Event } from 'cuda-stream-pool';
    for (let i = 0; i < 3; i++) { try { Event.create().destroy(); } catch { console.log('refused'); } }`;
  for (const fail of [undefined, 'cuEventCreate:2=CUDA_ERROR_OUT_OF_MEMORY']) {
    const file = path.join(folder, `${fail ? 'with' : 'without'}-rule.json`);
    const result = await runSimulated(source, { fail, env: { SIMULATED_DRIVER_COUNTS: file } });
    assert.equal(result.code, 0, result.stderr);
    const counts = JSON.parse(readFileSync(file, 'utf8')) as Record<string, Record<string, number>>;
    // A failed call counts as a call: the rules count calls, not successes.
    assert.equal(counts['main/1']!.cuEventCreate, 3, JSON.stringify(counts));
    assert.equal(counts['main/1']!.cuEventDestroy, fail ? 2 : 3, JSON.stringify(counts));
    assert.equal(result.stdout.trim(), fail ? 'refused' : '');
  }
});
