// Managed memory (host views, advice, prefetch, copies with device memory, its free through the synchronizer
// thread), the device's memory pool (attributes, threshold, trim), the device's properties and memory
// information, device synchronization both ways, and the legacy and per-thread default streams.
import { Device, DeviceBuffer, ManagedBuffer, Stream } from 'cuda-stream-pool';

import { cleanUp, expectAll, WrongResult, type Workload } from '../workload.js';

const BYTES = 64 << 10;

export const workload: Workload = {
  name: 'memory',
  async run() {
    const device = Device.get(0);
    const streams: Stream[] = [];
    let managed: ManagedBuffer | undefined;
    let buffer: DeviceBuffer | undefined;
    await cleanUp(
      async () => {
        if (!device.name || device.totalMemoryBytes <= 0) throw new WrongResult('a device without name or memory');
        if (device.memoryInfo().freeBytes <= 0) throw new WrongResult('no free memory');
        const pool = device.memoryPool;
        const threshold = pool.releaseThresholdBytes;
        pool.releaseThresholdBytes = 1 << 20;
        pool.releaseThresholdBytes = threshold;
        const stream = Stream.create();
        streams.push(stream);
        managed = ManagedBuffer.alloc(BYTES);
        managed.bytes.fill(3);
        managed.advise('setReadMostly');
        managed.advise('unsetReadMostly', { byteOffset: 0, byteLength: 4096 });
        managed.prefetch(device, stream);
        buffer = DeviceBuffer.alloc(BYTES, { stream });
        stream.copy(buffer, managed);
        stream.fill(buffer.subarray(0, 4096), 8);
        stream.copy(managed, buffer);
        managed.prefetch('cpu', stream);
        await stream.synchronize();
        expectAll('managed round trip', managed.view(Uint8Array, 0, 4096), 8);
        expectAll('managed round trip', managed.view(Uint8Array, 4096), 3);
        if (pool.usedBytes < BYTES || pool.reservedBytes < pool.usedBytes) throw new WrongResult('the pool does not count the buffer');
        const perThread = Stream.perThread();
        perThread.fill(buffer, 1);
        await perThread.synchronize();
        const legacy = Stream.legacy();
        expectAll('legacy stream', await buffer.toArray(Uint8Array, { stream: legacy }), 1);
        buffer.free();
        buffer = undefined;
        managed.free();
        managed = undefined;
        await device.synchronize();
        device.synchronizeSync();
        pool.trim();
      },
      () => buffer?.free(),
      () => managed?.free(),
      () => {
        for (const stream of streams) stream.destroy();
      },
    );
  },
};
