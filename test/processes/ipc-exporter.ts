// The exporting process of test/gpu/memory/ipc.test.ts: allocates an exportable buffer, queues a long kernel and then
// a fill of it on one stream, records an interprocess event after them, and prints both handles as one JSON line at
// once, before the work is done. Then it follows commands on stdin, one per line: `free` frees the buffer and
// destroys the event (printing `freed`), `exit` ends the process.
import { createInterface } from 'node:readline';

import { DeviceBuffer, Event, Stream } from 'cuda-stream-pool';
import { testKernels } from '../support/gpu.js';

const BYTES = Number(process.argv[2] ?? 1 << 20);
const VALUE = Number(process.argv[3] ?? 0x5a);
const SPIN_NS = BigInt(process.argv[4] ?? 200_000_000);

const stream = Stream.create();
const { spin } = await testKernels();
const buffer = DeviceBuffer.alloc(BYTES, { stream, exportable: true });
const event = Event.create({ interprocess: true });
spin.launch({ grid: 1, block: 1, stream }, SPIN_NS, 0n);
stream.fill(buffer, VALUE, { type: 'u8' });
event.record(stream);
console.log(JSON.stringify({ buffer: buffer.exportIpcHandle(), event: event.exportIpcHandle() }));

for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'free') {
    buffer.free();
    event.destroy();
    console.log('freed');
  } else if (line === 'exit') {
    break;
  }
}
stream.destroy();
process.stdin.destroy(); // the parent keeps its end open
