// Micro-benchmarks of copies between two GPUs (`stream.copy()` of DeviceBuffers on two devices): bandwidth without
// peer access, where the driver stages the bytes through host memory, then with it, where they go over NVLink or PCIe
// directly. Needs two GPUs; with fewer the group is skipped with the reason.
import { Device, DeviceBuffer, Stream } from 'cuda-stream-pool';
import { summarize } from './harness.js';
import type { MicroResult, Sample } from './schema.js';

/** Options of {@link peerMicroBenchmarks}. */
export interface PeerMicroOptions {
  /** The first device, as an ordinal; the second is the next visible device (wrapping around). @defaultValue 0 */
  device?: number;
  /** Bytes per copy. @defaultValue 64 MiB */
  copyBytes?: number;
  /** Copies per timed run. @defaultValue 8 */
  copiesPerRun?: number;
  /** Timed runs (after one warm-up run). @defaultValue 9 */
  runs?: number;
}

/** Why the peer group cannot run on this machine, or undefined when it can: it needs two visible GPUs. */
export function peerSkipReason(): string | undefined {
  const count = Device.count();
  return count < 2 ? `needs 2 GPUs; ${count} visible` : undefined;
}

/** Measures copies between `options.device` (A) and the next visible device (B), 64 MiB each, in GB/s: A → B and
 * B → A without peer access (the driver stages through host memory; measured first, since peer access once enabled
 * stays enabled for the process), then with peer access enabled both ways (`device.enablePeerAccess`), each direct row
 * beside its staged row as a ratio. The without rows are left out when peer access was already enabled in this
 * process, and the with rows where the devices have no peer path (`device.canAccessPeer`; one row with no value says
 * so instead). Each copy is ordered on a
 * stream of the destination device. Takes a few seconds.
 * @throws `Error` with {@link peerSkipReason} when fewer than two GPUs are visible; {@link CudaError} when the driver
 * fails. */
export async function peerMicroBenchmarks(options: PeerMicroOptions = {}): Promise<MicroResult[]> {
  const skip = peerSkipReason();
  if (skip !== undefined) throw new Error(skip);
  const a = Device.get(options.device ?? 0);
  const b = Device.get((a.ordinal + 1) % Device.count());
  const bytes = options.copyBytes ?? 64 << 20;
  const copies = options.copiesPerRun ?? 8;
  const runs = options.runs ?? 9;
  const mib = `${(bytes / 2 ** 20).toFixed(0)} MiB`;
  const streams = new Map([a, b].map((device) => [device, Stream.create({ device })]));
  const buffers = new Map([a, b].map((device) => [device, DeviceBuffer.alloc(bytes, { stream: streams.get(device)! })]));
  const results: MicroResult[] = [];
  try {
    for (const [device, buffer] of buffers) streams.get(device)!.fill(buffer, 1);
    await Promise.all([...streams.values()].map((stream) => stream.synchronize()));

    // `runs` timed runs (after a warm-up) of `copies` copies from `from` to `to` on the destination's stream, in GB/s.
    const measure = async (from: Device, to: Device): Promise<Sample> => {
      const stream = streams.get(to)!;
      const values: number[] = [];
      for (let r = -1; r < runs; r++) {
        const start = process.hrtime.bigint();
        for (let i = 0; i < copies; i++) stream.copy(buffers.get(to)!, buffers.get(from)!);
        await stream.synchronize();
        const ns = Number(process.hrtime.bigint() - start);
        if (r >= 0) values.push((copies * bytes) / ns);
      }
      return summarize(values);
    };
    const label = (from: Device, to: Device, how: string) => `stream.copy() device ${from.ordinal} → device ${to.ordinal}, ${how}, ${mib}`;

    const staged = new Map<Device, Sample>();
    if (!a.peerAccessEnabled(b) && !b.peerAccessEnabled(a)) {
      for (const [from, to] of [[a, b], [b, a]] as const) {
        const value = await measure(from, to);
        staged.set(to, value);
        results.push({ name: label(from, to, 'no peer access (staged through the host)'), unit: 'GB/s', value, better: 'higher' });
      }
    }
    if (a.canAccessPeer(b) && b.canAccessPeer(a)) {
      a.enablePeerAccess(b);
      b.enablePeerAccess(a);
      for (const [from, to] of [[a, b], [b, a]] as const) {
        const value = await measure(from, to);
        const baseline = staged.get(to);
        const row: MicroResult = { name: label(from, to, 'peer access enabled'), unit: 'GB/s', value, better: 'higher' };
        if (baseline) Object.assign(row, { baselineName: 'the same copy without peer access', baseline, ratio: value.median / baseline.median });
        results.push(row);
      }
    } else {
      // Said in a row of its own, so that a missing direct row is never silent.
      results.push({ name: `stream.copy() between device ${a.ordinal} and device ${b.ordinal} with peer access: not measured, the devices have no peer path (cuDeviceCanAccessPeer)`, unit: 'GB/s', value: summarize([]), better: 'higher' });
    }
  } finally {
    for (const [device, buffer] of buffers) buffer.free({ stream: streams.get(device)! });
    for (const stream of streams.values()) stream.destroy();
  }
  return results;
}
