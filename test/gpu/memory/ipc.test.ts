// Device memory and events shared between two processes through the driver's IPC handles: an exporting child writes
// a buffer after a long kernel and records an interprocess event; this process opens both, waits on the event on its
// own stream and reads the bytes. Then the import of a freed export, and of an exporter that exited, are refused.
// On the simulated driver the memory and the event's state live in shared memory (memfd).
import assert from 'node:assert/strict';
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { createInterface } from 'node:readline';
import { test } from 'node:test';

import { CudaError, DestroyedError, DeviceBuffer, Event, Stream, cuda, type DeviceBufferIpcHandle, type EventIpcHandle } from 'cuda-stream-pool';
import { gpu } from '../../support/gpu.js';

const EXPORTER = new URL('../../processes/ipc-exporter.js', import.meta.url);
const BYTES = 3 << 20;

/** Starts the exporter; resolves with the process, its handles and a reader of its next output line. */
async function startExporter(): Promise<{ child: ChildProcessByStdio<Writable, Readable, null>; handles: { buffer: DeviceBufferIpcHandle; event: EventIpcHandle }; nextLine: () => Promise<string> }> {
  const child = spawn(process.execPath, [EXPORTER.pathname, String(BYTES), String(0x5a)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const nextLine = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error('the exporter ended early');
    return value as string;
  };
  return { child, handles: JSON.parse(await nextLine()), nextLine };
}

test('a buffer and an event exported by another process: the wait on the event orders the read after its writes', gpu, async () => {
  const { child, handles, nextLine } = await startExporter();
  const before = cuda.liveObjects();
  try {
    assert.equal(handles.buffer.kind, 'cuda-stream-pool:DeviceBufferIpcHandle');
    assert.equal(handles.buffer.byteLength, BYTES);
    assert.equal(handles.buffer.processId, child.pid);
    assert.match(handles.buffer.handle, /^[0-9a-f]{128}$/);
    using stream = Stream.create();
    using event = Event.openIpcHandle(handles.event);
    const buffer = DeviceBuffer.openIpcHandle(handles.buffer, { stream });
    assert.equal(buffer.byteLength, BYTES);
    assert.equal(event.query(), false, 'the exporter\'s kernel still runs');
    stream.waitEvent(event);
    const bytes = await buffer.toArray(Uint8Array, { stream });
    assert.equal(bytes.length, BYTES);
    assert.ok(bytes.every((b) => b === 0x5a), 'every byte is the exporter\'s fill');
    assert.equal(event.query(), true);
    // Written here, read there is the same memory: a fill of the first byte is seen by a second import.
    stream.fill(buffer.subarray(0, 1), 0x11, { type: 'u8' });
    const again = DeviceBuffer.openIpcHandle(handles.buffer, { stream });
    assert.deepEqual([...(await again.subarray(0, 2).toArray(Uint8Array, { stream }))], [0x11, 0x5a]);
    again.free();
    buffer.free();
    assert.equal(cuda.liveObjects().deviceBytes, before.deviceBytes, 'closing the imports counts their bytes back');

    // The exporter frees: a new import is refused by the driver.
    child.stdin.write('free\n');
    assert.equal(await nextLine(), 'freed');
    assert.throws(() => DeviceBuffer.openIpcHandle(handles.buffer, { stream }), (error: unknown) => error instanceof CudaError && /cuIpcOpenMemHandle/.test(error.message));
    // An event's handle: the simulated driver refuses it too; the driver (580) still opens it, as an event whose last
    // record is complete.
    let reopened: Event | undefined;
    try {
      reopened = Event.openIpcHandle(handles.event);
    } catch (error) {
      assert.ok(error instanceof CudaError && /cuIpcOpenEventHandle/.test(error.message), String(error));
    }
    if (reopened) {
      assert.equal(reopened.query(), true);
      reopened.destroy();
    }
  } finally {
    child.stdin.write('exit\n');
    await new Promise((resolve) => child.once('exit', resolve));
  }
  // The exporter is gone: refused before the driver is asked.
  assert.throws(() => DeviceBuffer.openIpcHandle(handles.buffer), (error: unknown) => error instanceof DestroyedError && new RegExp(`exported by process ${child.pid}, which has exited`).test(error.message));
  assert.throws(() => Event.openIpcHandle(handles.event), DestroyedError);
});

test('exportable buffers and interprocess events in one process: what can be exported, and handles this process made', gpu, () => {
  using stream = Stream.create();
  using exportable = DeviceBuffer.alloc(4096, { stream, exportable: true });
  using pooled = DeviceBuffer.alloc(4096, { stream });
  const handle = exportable.exportIpcHandle();
  assert.equal(JSON.stringify(JSON.parse(JSON.stringify(handle))), JSON.stringify(handle), 'a plain record: JSON keeps it');
  assert.throws(() => pooled.exportIpcHandle(), { code: 'ERR_INVALID_STATE', message: /stream-ordered pool, which the driver cannot export/ });
  assert.throws(() => exportable.subarray(0, 16).exportIpcHandle(), { code: 'ERR_INVALID_STATE', message: /a view \(subarray\)/ });
  assert.throws(() => DeviceBuffer.openIpcHandle(handle, { stream }), { code: 'ERR_INVALID_ARG_VALUE', message: /is this process/ });
  using plain = Event.create();
  using interprocess = Event.create({ interprocess: true });
  assert.throws(() => plain.exportIpcHandle(), { code: 'ERR_INVALID_STATE' });
  assert.throws(() => Event.openIpcHandle(interprocess.exportIpcHandle()), { code: 'ERR_INVALID_ARG_VALUE' });
  // An exportable buffer works as any other.
  stream.fill(exportable, 7, { type: 'u8' });
  stream.copy(pooled, exportable);
  stream.synchronizeSync();
});
