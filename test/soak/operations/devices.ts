// Soak operations over several devices: the device-spreading pool group (also on one device, where it spans device
// 0 alone) with its leases checked against the default pool's ledger, peer access, copies between two devices
// (drawn only when two are visible), and invalid calls.
import { Device, DeviceBuffer, Stream, StreamPool, type StreamLease } from 'cuda-stream-pool';

import { SoakFailure } from '../check.js';
import type { Context } from '../context.js';
import { firstDifference, pattern, pickInvalid, type InvalidCase, type Operation } from '../operation.js';
import { releaseEverything } from './pools.js';

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

/** Holds a group's lease in the ledger of its device's default pool (device 0's is shared by every thread) while
 * `use` runs, then releases it: a stream leased twice fails here. */
async function holdGroupLease(ctx: Context, lease: StreamLease, how: string, use: () => Promise<void>): Promise<void> {
  const device = lease.stream.device.ordinal;
  const pool = StreamPool.default(device);
  const slot = Array.from({ length: pool.size }, (_, i) => pool.getStream(i).id).indexOf(lease.stream.id);
  if (slot < 0) throw new SoakFailure(`${how} gave stream ${lease.stream.id}, which is not one of device ${device}'s default pool`);
  const ledger = device === 0 ? ctx.defaultLedger : undefined;
  ledger?.claim(slot, ctx.thread, `${how} (default pool stream ${slot})`);
  try {
    await use();
  } finally {
    ledger?.unclaim(slot, ctx.thread, `release of ${how}`);
    lease.release();
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
      // At most one lease wait per thread (Note [soak waits]).
      const acquire = ctx.leaseWaits === 0 && ctx.random.chance(0.5);
      return {
        text: `StreamPool.forDevices() over ${devices} device(s): round trip of ${length} B on getStream(), in run(), under tryAcquire()${acquire ? ' and acquire()' : ''}; stats(), destroy()`,
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
            const tried = group.tryAcquire();
            if (tried) await holdGroupLease(ctx, tried, 'forDevices tryAcquire()', () => roundTrip(ctx, tried.stream, source, 'forDevices tryAcquire()'));
            if (acquire) {
              // Note [soak waits]: nothing held while a lease is awaited.
              releaseEverything(ctx);
              const lease = await ctx.within(group.acquire(), 'forDevices acquire()');
              await holdGroupLease(ctx, lease, 'forDevices acquire()', () => roundTrip(ctx, lease.stream, source, 'forDevices acquire()'));
            }
          } finally {
            group.destroy();
          }
          if (!group.destroyed) throw new SoakFailure('forDevices destroy(): the group does not say it is destroyed');
          ctx.invalid('forDevices getStream() after destroy', ['destroyed'], () => group.getStream());
          await ctx.invalidEither('forDevices acquire() after destroy', ['destroyed'], () => group.acquire());
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
  {
    name: 'devices.peer',
    weight: 0.5,
    threads: 'any',
    plan(ctx) {
      if (devices < 2) return undefined;
      return {
        text: 'Device 0 and 1: canAccessPeer(), enablePeerAccess() where it can, peerAccessEnabled()',
        run() {
          const [a, b] = [Device.get(0), Device.get(1)];
          const can = a.canAccessPeer(b);
          if (can !== a.canAccessPeer(1)) throw new SoakFailure('canAccessPeer() differs for a Device and its ordinal');
          if (!can) return;
          a.enablePeerAccess(b);
          a.enablePeerAccess(1); // idempotent
          if (!a.peerAccessEnabled(b)) throw new SoakFailure('peerAccessEnabled(1) is false after enablePeerAccess(1)');
        },
      };
    },
  },
  {
    name: 'devices.invalid',
    weight: 0.7,
    threads: 'any',
    plan(ctx) {
      const device = Device.get(0);
      const cases: InvalidCase[] = [
        ['Device.get(0).canAccessPeer(0) (itself)', ['value'], () => device.canAccessPeer(0)],
        ['Device.get(0).enablePeerAccess(device 0)', ['value'], () => device.enablePeerAccess(device)],
        ['Device.get(0).peerAccessEnabled(4096)', ['range'], () => device.peerAccessEnabled(4096)],
        ['Device.get(0).canAccessPeer("1")', ['type'], () => device.canAccessPeer('1' as never)],
        ['StreamPool.forDevices([])', ['value'], () => StreamPool.forDevices([])],
        ['StreamPool.forDevices([0, 0])', ['value'], () => StreamPool.forDevices([0, 0])],
        ['StreamPool.forDevices([4096])', ['range'], () => StreamPool.forDevices([4096])],
        ['StreamPool.forDevices(42)', ['type'], () => StreamPool.forDevices(42 as never)],
      ];
      return pickInvalid(ctx, cases);
    },
  },
];
