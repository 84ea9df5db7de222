// The test kernels from their PTX (Module.load: there is no NVRTC here), their attributes and occupancy, launches
// that write and that spin (plainly and with launch attributes), a missing kernel (an error from the driver, named through cuGetErrorName), and events:
// timed, blocking, waited on by another stream, queried, synchronized both ways, an elapsed time.
import { readFileSync } from 'node:fs';

import { CudaError, DeviceBuffer, Event, Module, Stream } from 'cuda-stream-pool';

import { cleanUp, expectAll, WrongResult, type Workload } from '../workload.js';

// Not through test/support/gpu.js, which asks the driver for a device when imported: calls the sweep would count.
const ptx = readFileSync(new URL('../../../../../test/kernels/test-kernels.ptx', import.meta.url), 'utf8');

export const workload: Workload = {
  name: 'kernels',
  async run() {
    const module = await Module.load(ptx);
    const owned: { destroy(): void }[] = [];
    let words: DeviceBuffer | undefined;
    let stamps: DeviceBuffer | undefined;
    await cleanUp(
      async () => {
        const stream = Stream.create();
        owned.push(stream);
        const second = Stream.create();
        owned.push(second);
        const fill = module.getFunction('fill_u32', ['ptr', 'u32', 'u32']);
        const spin = module.getFunction('spin', ['u64', 'ptr']);
        if (fill.attributes.maxThreadsPerBlock < 32) throw new WrongResult('fill_u32 takes fewer than 32 threads');
        const { blockSize } = fill.maxPotentialBlockSize();
        fill.setMaxDynamicSharedMemBytes(0);
        try {
          module.getFunction('missing', []);
          throw new WrongResult('a kernel that does not exist was found');
        } catch (error) {
          if (!(error instanceof CudaError) || error.code !== 'CUDA_ERROR_NOT_FOUND') throw error;
        }
        const start = Event.create({ timing: true });
        owned.push(start);
        const end = Event.create({ timing: true, blockingSync: true });
        owned.push(end);
        words = DeviceBuffer.alloc(1024 * 4, { stream });
        stamps = DeviceBuffer.alloc(16, { stream });
        start.record(stream);
        fill.launch({ grid: Math.ceil(1024 / blockSize), block: blockSize, stream }, words, 42, 1024);
        spin.launch({ grid: 1, block: 1, stream }, 1_000_000n, stamps);
        end.record(stream);
        second.waitEvent(end);
        const marker = second.recordEvent();
        owned.push(marker);
        await end.synchronize();
        end.synchronizeSync();
        if (!end.query()) throw new WrongResult('a completed event reports busy');
        if (!(Event.elapsedMs(start, end) >= 0)) throw new WrongResult('a negative elapsed time');
        await marker.synchronize();
        expectAll('fill_u32', await words.toArray(Uint32Array, { stream: second }), 42);
        // Through cuLaunchKernelEx: clusters with programmatic dependent launch, then a cooperative grid.
        fill.launch({ grid: 8, block: 128, stream, cluster: 2, programmaticDependentLaunch: true }, words, 43, 1024);
        expectAll('fill_u32 in clusters', await words.toArray(Uint32Array, { stream }), 43);
        fill.launch({ grid: 8, block: 128, stream, cooperative: true }, words, 44, 1024);
        expectAll('fill_u32 cooperatively', await words.toArray(Uint32Array, { stream }), 44);
        // A cooperative grid larger than the device holds at once is refused, its message naming the room there is.
        let refused: unknown;
        try {
          fill.launch({ grid: 1 << 20, block: 128, stream, cooperative: true }, words, 45, 1024);
        } catch (error) {
          refused = error;
        }
        if (refused === undefined) {
          // Recorded (deferred submission) where the library could not learn the room: the driver refuses it when it
          // is issued, and the stream's next wait reports that.
          try {
            await stream.synchronize();
          } catch (error) {
            refused = error;
          }
          if (refused === undefined) throw new WrongResult('a cooperative launch of 1 Mi blocks was accepted');
        }
        if ((refused as { code?: string }).code !== 'CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE') throw refused;
        const [begun, ended] = await stamps.toArray(BigUint64Array, { stream });
        if (!(ended! - begun! >= 1_000_000n)) throw new WrongResult('the spin kernel took less than 1 ms');
      },
      () => words?.free(),
      () => stamps?.free(),
      () => {
        for (const thing of owned) thing.destroy();
      },
      () => module.unload(),
    );
  },
};
