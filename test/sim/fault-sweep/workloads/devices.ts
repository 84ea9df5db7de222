// Two devices: peer access (asked, enabled, reported), a copy between them, a stream of one device waiting on a
// stream of the other, and each device's memory and synchronizer thread.
import { Device, DeviceBuffer, Stream } from 'cuda-stream-pool';

import { cleanUp, expectElements, WrongResult, type Workload } from '../workload.js';

const BYTES = 32 << 10;

export const workload: Workload = {
  name: 'devices',
  devices: 2,
  async run() {
    const [zero, one] = [Device.get(0), Device.get(1)];
    const streams: Stream[] = [];
    const buffers: DeviceBuffer[] = [];
    await cleanUp(
      async () => {
        if (!zero.canAccessPeer(one)) throw new WrongResult('device 0 cannot reach device 1');
        if (!zero.peerAccessEnabled(one)) zero.enablePeerAccess(one);
        if (!zero.peerAccessEnabled(one)) throw new WrongResult('peer access not enabled');
        const s0 = Stream.create({ device: zero });
        streams.push(s0);
        const s1 = Stream.create({ device: one });
        streams.push(s1);
        const input = Uint8Array.from({ length: BYTES }, (_, i) => (i * 11 + 5) & 0xff);
        const a = DeviceBuffer.from(input, { stream: s0 });
        buffers.push(a);
        const b = DeviceBuffer.alloc(BYTES, { stream: s1 });
        buffers.push(b);
        s1.waitStream(s0);
        s1.copy(b, a); // peer copy, queued on device 1
        const c = DeviceBuffer.alloc(BYTES, { stream: s0 });
        buffers.push(c);
        s0.waitStream(s1);
        s0.copy(c, b); // and back, queued on device 0
        expectElements('peer round trip', await c.toArray(Uint8Array, { stream: s0 }), input);
        await Promise.all([zero.synchronize(), one.synchronize()]);
      },
      () => {
        for (const buffer of buffers) buffer.free();
      },
      () => {
        for (const stream of streams) stream.destroy();
      },
    );
  },
};
