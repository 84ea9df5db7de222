// Device-side timestamps (%globaltimer, ns) written by the spin kernel: the way GPU tests prove overlap.
import { DeviceBuffer, type Stream } from 'cuda-stream-pool';

import { testKernels } from './gpu.js';

/** Space for `count` [start, end] pairs in device memory; `spin(stream, ns, slot)` runs the spin kernel that
 * writes pair `slot`; `read(stream)` copies them back and resolves once they landed. */
export class Stamps {
  readonly buffer: DeviceBuffer;
  constructor(readonly count: number, stream: Stream) {
    this.buffer = DeviceBuffer.alloc(16 * count, { stream });
    stream.fill(this.buffer, 0);
  }

  async spin(stream: Stream, ns: bigint, slot: number): Promise<void> {
    const { spin } = await testKernels(stream.device.ordinal);
    spin.launch({ grid: 1, block: 32, stream }, ns, this.buffer.ptr + BigInt(16 * slot));
  }

  /** Copies the pairs back on `stream` (which must be ordered after the kernels) and waits for them. */
  async read(stream: Stream): Promise<Array<[bigint, bigint]>> {
    const host = new BigUint64Array(2 * this.count);
    stream.copy(host, this.buffer);
    await stream.synchronize();
    return Array.from({ length: this.count }, (_, i) => [host[2 * i]!, host[2 * i + 1]!] as [bigint, bigint]);
  }

  free(): void {
    this.buffer.free();
  }
}
