// Copies of every kind on one device: pageable and pinned host memory both ways, device to device, fills of each
// element type, a pageable copy larger than the staging cap (in pieces, each behind a gate), batches, registered host
// memory, 2D copies, toArray, and a wait of one stream on another. It trims the pinned cache at the end.
import { DeviceBuffer, HostRegistration, PinnedBuffer, Stream } from 'cuda-stream-pool';

import { cleanUp, expectAll, expectElements, type Workload } from '../workload.js';

const SMALL = 64 << 10;
const LARGE = 1 << 20; // four pieces of the 256 KiB staging cap set below

export const workload: Workload = {
  name: 'copies',
  env: { CUDA_STREAM_POOL_STAGING_BYTES: '262144' },
  async run() {
    const made: { free(): void; freed: boolean }[] = [];
    const keep = <T extends { free(): void; freed: boolean }>(thing: T): T => (made.push(thing), thing);
    const streams: Stream[] = [];
    const input = Uint8Array.from({ length: SMALL }, (_, i) => (i * 7 + 3) & 0xff);
    const large = Uint8Array.from({ length: LARGE }, (_, i) => (i * 13 + 1) & 0xff);
    await cleanUp(
      async () => {
        const stream = Stream.create();
        streams.push(stream);
        const other = Stream.create({ nonBlocking: true, priority: stream.device.streamPriorityRange.greatest });
        streams.push(other);
        const a = keep(DeviceBuffer.from(input, { stream })); // pageable to device, through staging
        const b = keep(DeviceBuffer.alloc(SMALL, { stream }));
        stream.copy(b, a); // device to device
        const pinned = keep(PinnedBuffer.alloc(SMALL));
        stream.copy(pinned, b); // device to pinned
        await stream.synchronize();
        expectElements('device to device to pinned', pinned.bytes, input);
        stream.fill(b, 0x5a, { type: 'u8' });
        stream.fill(b.subarray(0, 4096), 1.5, { type: 'f32' });
        stream.fill(b.subarray(4096, 8192), 0xdeadbeef, { type: 'u32' });
        other.waitStream(stream);
        const back = new Uint8Array(SMALL);
        other.copy(back, b); // device to pageable, through staging
        await other.synchronize();
        expectAll('u8 fill', back.subarray(8192), 0x5a);
        expectAll('f32 fill', new Float32Array(back.buffer, 0, 1024), 1.5);
        expectAll('u32 fill', new Uint32Array(back.buffer, 4096, 1024), 0xdeadbeef);
        pinned.bytes.set(input);
        stream.copy(a, pinned); // pinned to device
        const big = keep(DeviceBuffer.alloc(LARGE, { stream }));
        stream.copy(big, large); // pageable to device in pieces
        const bigBack = new Uint8Array(LARGE);
        stream.copy(bigBack, big); // device to pageable in pieces
        const words = await a.toArray(Uint32Array, { stream });
        await stream.synchronize();
        expectElements('pinned to device', new Uint8Array(words.buffer), input);
        expectElements('large round trip', bigBack, large);
        // One batch: pinned, pageable and device sources into b (through the driver); then b back into pinned memory
        // in two pieces (through the library's copy kernel).
        stream.fill(b, 0);
        stream.copyBatch([
          { dst: b, src: pinned, byteLength: 16384 },
          { dst: b, src: input, srcOffset: 16384, dstOffset: 16384, byteLength: 16384 },
          { dst: b, src: a, srcOffset: 32768, dstOffset: 32768, byteLength: 32768 },
        ]);
        await stream.synchronize(); // the batch read pinned; now it is the destination
        pinned.bytes.fill(0);
        stream.copyBatch([
          { dst: pinned, src: b, byteLength: 40000 },
          { dst: pinned, src: b, dstOffset: 40000, srcOffset: 40000 },
        ]);
        await stream.synchronize();
        expectElements('batched copies', pinned.bytes, input);
        // Registered host memory: a pinned copy each way, unregistered while the second may still be queued.
        const registered = new Uint8Array(new ArrayBuffer(SMALL));
        const registration = HostRegistration.register(registered);
        try {
          stream.copy(b, input);
          stream.copy(registered, b);
        } finally {
          registration.unregister();
        }
        await stream.synchronize();
        expectElements('registered host memory', registered, input);
        // A 2D copy: 64 rows of 1 KiB from pinned memory into pitched device memory, and back.
        const pitched = keep(DeviceBuffer.allocPitched(1000, 64, { stream }));
        stream.copy2D(pitched, pinned, { widthBytes: 1000, height: 64, srcPitch: 1024 });
        const rows = keep(PinnedBuffer.alloc(SMALL));
        stream.copy2D(rows, pitched, { widthBytes: 1000, height: 64, dstPitch: 1024 });
        await stream.synchronize();
        for (let r = 0; r < 64; r++)
          expectElements(`2D row ${r}`, rows.bytes.subarray(r * 1024, r * 1024 + 1000), input.subarray(r * 1024, r * 1024 + 1000));
        stream.synchronizeSync();
      },
      async () => {
        for (const thing of made) if (!thing.freed) thing.free();
      },
      async () => {
        for (const stream of streams) stream.destroy();
      },
      // The idle pinned cache goes back to the driver (cuMemFreeHost), so that its failure is swept too.
      () => PinnedBuffer.trimCache(),
    );
  },
};
