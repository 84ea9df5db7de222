// The interprocess calls failing, injected by the simulated driver (SIMULATED_DRIVER_FAIL): each throws a CudaError
// naming the driver call, leaves cuda.liveObjects() as it was, and a retry succeeds. The imports open the handles of
// an exporting child process (test/processes/ipc-exporter.ts), which the failure rule does not touch.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { failOnce, needsCompiler, simulatedJson } from '../support/simulated-driver.js';

const exporter = `
  import { spawn } from 'node:child_process';
  import { createInterface } from 'node:readline';
  const child = spawn(process.execPath, ['dist/test/processes/ipc-exporter.js', '8192', '7', '0'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const handles = JSON.parse((await createInterface({ input: child.stdout })[Symbol.asyncIterator]().next()).value);
  const stream = Stream.create();`;

for (const [what, fail, setup, attempt, teardown] of [
  ['an exportable allocation', 'cuMemAlloc:1=CUDA_ERROR_OUT_OF_MEMORY', '', 'DeviceBuffer.alloc(4096, { exportable: true })', 'retried.free();'],
  ['an export of a buffer', 'cuIpcGetMemHandle:1=CUDA_ERROR_INVALID_VALUE', 'const buffer = DeviceBuffer.alloc(4096, { exportable: true });', 'buffer.exportIpcHandle()', 'buffer.free();'],
  ['an export of an event', 'cuIpcGetEventHandle:1=CUDA_ERROR_INVALID_VALUE', 'const event = Event.create({ interprocess: true });', 'event.exportIpcHandle()', 'event.destroy();'],
  ['an import of a buffer', 'cuIpcOpenMemHandle:1=CUDA_ERROR_INVALID_VALUE', exporter, 'DeviceBuffer.openIpcHandle(handles.buffer, { stream })', "retried.free(); child.stdin.write('exit\\n');"],
  ['an import whose size cannot be read', 'cuMemGetAddressRange:1=CUDA_ERROR_UNKNOWN', exporter, 'DeviceBuffer.openIpcHandle(handles.buffer, { stream })', "retried.free(); child.stdin.write('exit\\n');"],
  ['an import of an event', 'cuIpcOpenEventHandle:1=CUDA_ERROR_INVALID_VALUE', exporter, 'Event.openIpcHandle(handles.event)', "retried.destroy(); child.stdin.write('exit\\n');"],
] as const) {
  test(`${what}: a failed ${fail.split(':')[0]} throws a CudaError naming it, leaves the live objects as they were, and a retry succeeds`, needsCompiler, async () => {
    const result = await simulatedJson<{ name: string; code: string; call: string; before: number[]; afterFailure: number[]; retried: boolean }>(
      failOnce(setup, attempt, teardown),
      { fail },
    );
    const [call, code] = fail.split(':1=');
    assert.deepEqual({ name: result.name, code: result.code, call: result.call }, { name: 'CudaError', code, call });
    assert.deepEqual(result.afterFailure, result.before);
    assert.equal(result.retried, true);
  });
}

for (const [what, fail, setup] of [
  ['an exportable buffer whose cuMemFree fails', 'cuMemFree:1=CUDA_ERROR_UNKNOWN', 'const buffer = DeviceBuffer.alloc(4096, { exportable: true });'],
  ['an import whose cuIpcCloseMemHandle fails', 'cuIpcCloseMemHandle:1=CUDA_ERROR_UNKNOWN', `${exporter}\n const buffer = DeviceBuffer.openIpcHandle(handles.buffer, { stream });`],
] as const) {
  test(`${what}: free() throws a CudaError naming the call, the buffer is freed for the library, and the process goes on`, needsCompiler, async () => {
    const result = await simulatedJson<{ code: string; call: string; freed: boolean; bytes: number }>(
      `import { cuda, DeviceBuffer, Event, Stream } from 'cuda-stream-pool';
       ${setup}
       let error;
       try { buffer.free(); } catch (e) { error = e; }
       if (typeof child !== 'undefined') child.stdin.write('exit\\n');
       console.log(JSON.stringify({ code: error?.code, call: error?.call, freed: buffer.freed, bytes: cuda.liveObjects().deviceBytes }));`,
      { fail },
    );
    const [call, code] = fail.split(':1=');
    assert.deepEqual(result, { code, call, freed: true, bytes: 0 });
  });
}
