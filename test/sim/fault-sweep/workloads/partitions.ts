// Partitions of a device: the split (made once per process, so the second run finds it), a pool in one partition
// whose leases fill and read back memory, and a stream in the other that waits on the pool's work.
import { Device, DeviceBuffer, Stream, StreamPool } from 'cuda-stream-pool';

import { cleanUp, expectAll, WrongResult, type Workload } from '../workload.js';

export const workload: Workload = {
  name: 'partitions',
  async run() {
    const device = Device.get(0);
    const [small, rest] = device.partition([16]);
    if (!small || !rest || small.multiprocessorCount < 16) throw new WrongResult('the split lacks its partitions');
    let pool: StreamPool | undefined;
    let other: Stream | undefined;
    await cleanUp(
      async () => {
        pool = new StreamPool({ partition: small, size: 2 });
        other = Stream.create({ partition: rest });
        const values = await Promise.all(
          [0x11, 0x22, 0x33].map((value) =>
            pool!.run(async (stream) => {
              const buffer = DeviceBuffer.alloc(8192, { stream });
              try {
                stream.fill(buffer, value);
                other!.waitStream(stream);
                return await buffer.toArray(Uint8Array, { stream: other! });
              } finally {
                buffer.free();
              }
            }),
          ),
        );
        values.forEach((bytes, i) => expectAll(`partition fill ${i}`, bytes, [0x11, 0x22, 0x33][i]!));
      },
      () => other?.destroy(),
      () => pool?.destroy(),
    );
  },
};
