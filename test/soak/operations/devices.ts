// Soak operations over several devices: the device-spreading pool group (also on one device, where it spans device
// 0 alone) and copies between two devices (drawn only when two are visible).
import { Device, DeviceBuffer, Stream, StreamPool } from 'cuda-stream-pool';

import { SoakFailure } from '../check.js';
import type { Context } from '../context.js';
import { firstDifference, pattern, type Operation } from '../operation.js';

const devices = Device.count();

/** Copies `source` into a new buffer on `stream`, reads it back, and checks the bytes. */
async function roundTrip(ctx: Context, stream: Stream, source: Uint8Array, what: string): Promise<void> {
  const buffer = DeviceBuffer.alloc(source.length, { stream });
  try {
    stream.copy(buffer, source);
    const back = await ctx.within(buffer.toArray(Uint8Array, { stream }), `${what}: toArray()`);
    const at = firstDifference(back, source);
    if (at >= 0) throw new SoakFailure(`${what}: byte ${at} is ${back[at]}, expected ${source[at]}`);
    ctx.roundTrips++;
  } finally {
    buffer.free();
  }
}

export const deviceOperations: Operation[] = [
  {
    name: 'devices.spread',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      const length = ctx.random.size(16 * 1024);
      const salt = ctx.random.int(0, 2 ** 31);
      return {
        text: `StreamPool.forDevices() over ${devices} device(s): round trip of ${length} B on getStream() and in run(), stats(), destroy()`,
        async run() {
          const group = StreamPool.forDevices();
          try {
            const source = pattern(length, salt);
            await roundTrip(ctx, group.getStream(), source, 'forDevices getStream()');
            await ctx.within(
              group.run(async (stream) => {
                // Inside run(), memory without an explicit stream lands on the leased stream's device.
                const scratch = DeviceBuffer.alloc(64);
                try {
                  if (scratch.device !== stream.device)
                    throw new SoakFailure(`forDevices run(): DeviceBuffer.alloc() landed on device ${scratch.device.ordinal}, the leased stream is on ${stream.device.ordinal}`);
                } finally {
                  scratch.free();
                }
                await roundTrip(ctx, stream, source, 'forDevices run()');
              }),
              'forDevices run()',
            );
            const stats = group.stats();
            if (stats.length !== group.devices.length) throw new SoakFailure(`forDevices stats(): ${stats.length} entries for ${group.devices.length} devices`);
          } finally {
            group.destroy();
          }
          if (!group.destroyed) throw new SoakFailure('forDevices destroy(): the group does not say it is destroyed');
        },
      };
    },
  },
  {
    name: 'devices.peerCopy',
    weight: devices >= 2 ? 1 : 0,
    threads: 'any',
    plan(ctx) {
      const length = ctx.random.size(64 * 1024);
      const salt = ctx.random.int(0, 2 ** 31);
      const onSecond = ctx.random.chance(0.5);
      return {
        text: `copy ${length} B from device 0 to device 1 on a stream of device ${onSecond ? 1 : 0}, read back on device 1`,
        async run() {
          const first = Stream.create({ device: 0 });
          const second = Stream.create({ device: 1 });
          const a = DeviceBuffer.alloc(length, { stream: first });
          const b = DeviceBuffer.alloc(length, { stream: second });
          try {
            const source = pattern(length, salt);
            first.copy(a, source);
            await ctx.within(first.synchronize(), 'peer copy: the source written');
            const copier = onSecond ? second : first;
            copier.copy(b, a);
            await ctx.within(copier.synchronize(), 'peer copy: synchronize()');
            const back = await ctx.within(b.toArray(Uint8Array, { stream: second }), 'peer copy: toArray()');
            const at = firstDifference(back, source);
            if (at >= 0) throw new SoakFailure(`peer copy of ${length} B: byte ${at} is ${back[at]}, expected ${source[at]}`);
            ctx.roundTrips++;
          } finally {
            a.free();
            b.free();
            // Raced like every await: a hang here is a step timeout naming it, not a silent watchdog kill.
            await ctx.within(first.synchronize().catch(() => undefined), 'peer copy: first stream drained');
            await ctx.within(second.synchronize().catch(() => undefined), 'peer copy: second stream drained');
            first.destroy();
            second.destroy();
          }
        },
      };
    },
  },
];
