// The validation of interprocess handles, without a GPU: every check runs before the driver is needed.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

import { DestroyedError, DeviceBuffer, Event } from 'cuda-stream-pool';

const HEX = 'ab'.repeat(64);
/** A process id that has surely exited: a child that ran and was reaped. */
const goneProcess = spawnSync(process.execPath, ['-e', '0']).pid!;

test('DeviceBuffer.openIpcHandle() rejects anything but a record from exportIpcHandle(), naming the bad field', () => {
  const good = { kind: 'cuda-stream-pool:DeviceBufferIpcHandle', handle: HEX, byteLength: 4096, processId: goneProcess } as const;
  for (const bad of [undefined, null, 42])
    assert.throws(() => DeviceBuffer.openIpcHandle(bad as never), { code: 'ERR_INVALID_ARG_TYPE', message: /"handle" must be a DeviceBufferIpcHandle/ });
  for (const bad of [{}, { ...good, kind: 'other' }])
    assert.throws(() => DeviceBuffer.openIpcHandle(bad as never), { code: 'ERR_INVALID_ARG_TYPE', message: /"handle\.kind" must be 'cuda-stream-pool:DeviceBufferIpcHandle'/ });
  assert.throws(() => DeviceBuffer.openIpcHandle({ ...good, handle: 7 } as never), { code: 'ERR_INVALID_ARG_TYPE', message: /"handle\.handle"/ });
  assert.throws(() => DeviceBuffer.openIpcHandle({ ...good, handle: 'ab' }), { code: 'ERR_INVALID_ARG_VALUE', message: /"handle\.handle" must be 128 hexadecimal digits.*received 2 characters/ });
  assert.throws(() => DeviceBuffer.openIpcHandle({ ...good, handle: HEX.slice(0, -2) + 'zz' }), { code: 'ERR_INVALID_ARG_VALUE', message: /character 126 is "z"/ });
  assert.throws(() => DeviceBuffer.openIpcHandle({ ...good, byteLength: 0 }), { code: 'ERR_OUT_OF_RANGE', message: /"handle\.byteLength"/ });
  assert.throws(() => DeviceBuffer.openIpcHandle({ ...good, processId: -1 }), { code: 'ERR_OUT_OF_RANGE', message: /"handle\.processId"/ });
  assert.throws(() => DeviceBuffer.openIpcHandle({ ...good, processId: process.pid }), { code: 'ERR_INVALID_ARG_VALUE', message: /is this process/ });
  assert.throws(() => DeviceBuffer.openIpcHandle(good), (error: unknown) => error instanceof DestroyedError && error.message === `DeviceBuffer.openIpcHandle(): the DeviceBuffer was exported by process ${goneProcess}, which has exited`);
});

test('Event.openIpcHandle() checks its record; Event.create() refuses an interprocess event with timing', () => {
  const good = { kind: 'cuda-stream-pool:EventIpcHandle', handle: HEX, processId: goneProcess } as const;
  assert.throws(() => Event.openIpcHandle({ ...good, kind: 'cuda-stream-pool:DeviceBufferIpcHandle' } as never), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => Event.openIpcHandle({ ...good, handle: HEX.slice(2) }), { code: 'ERR_INVALID_ARG_VALUE' });
  assert.throws(() => Event.openIpcHandle(good), DestroyedError);
  assert.throws(() => Event.create({ interprocess: true, timing: true }), { code: 'ERR_INVALID_ARG_VALUE', message: /"options\.timing" must be false for an interprocess event/ });
  assert.throws(() => Event.create({ interprocess: 'yes' as never }), { code: 'ERR_INVALID_ARG_TYPE', message: /"options\.interprocess"/ });
  assert.throws(() => DeviceBuffer.alloc(16, { exportable: 1 as never }), { code: 'ERR_INVALID_ARG_TYPE', message: /"options\.exportable"/ });
  assert.throws(() => DeviceBuffer.from(new Uint8Array(4), { exportable: true } as never), { code: 'ERR_INVALID_ARG_VALUE', message: /"options\.exportable" is not a DeviceBuffer\.from option/ });
});
