// A group of stream pools, one per device, that spreads tasks over several GPUs: round-robin over the devices, then
// over each device's streams. The public class over real streams; its policy, which the CPU tests run over fake
// streams, is GroupCore in pool/group-policy.ts. See Note [device spreading].

/* Note [device spreading]: `StreamPool.forDevices(devices)` groups each device's process-wide default pool
 * (`StreamPool.default(device)`), in the order the devices are given. It creates no stream and owns nothing.
 * - `getStream()`: the n-th call on a group object goes to device n % D and returns that device pool's next stream,
 *   in the pool's own round-robin sequence (shared with every other user of the default pool). So D calls in a row
 *   touch every device once, and the streams of each device are walked as its pool walks them.
 *   `getStream(index)` is device `index % D`, stream `floor(index / D)` of its pool (modulo the pool's size): the same
 *   stream on every call, and consecutive indexes alternate between devices.
 * - `tryAcquire()` / `acquire()` / `run()`: starting with the device whose turn it is, the first device with a free
 *   stream grants the lease (at most D tries, none of which waits), and the turn moves to the device after it. When
 *   every stream of every device is leased, the wait queues on the device whose turn it is, where that pool serves its
 *   waiters first come first served; the turn moves on, so concurrent waits spread over the devices too.
 * - The turns belong to the group object (each thread makes its own group): no counter is shared between threads.
 * - `destroy()` detaches the group object only; the pools stay, for the process.
 */
import { checkConstruction, guardReceivers, internalConstruction, lockFields } from '../internal/validate.js';
import { privateState, register } from '../internal/handles.js';
import { enterScope } from '../stream/scope.js';
import type { Device } from '../device/device.js';
import type { Stream } from '../stream/stream.js';
import type { StreamLease } from './stream-lease.js';
import type { AcquireOptions, RunOptions, StreamPoolStats, TryAcquireOptions } from './pool-policy.js';
import { GroupCore, type PoolGroupMember } from './group-policy.js';

/** The policy of a group over StreamPools. */
type Core = GroupCore<Stream, StreamLease, StreamPoolStats>;

// A group's construction, for poolGroup().
const groups = privateState<{ make(core: Core, devices: readonly Device[]): StreamPoolGroup }>('StreamPoolGroup', ['make']);

/** Stream pools of several devices that work together: each device's process-wide default pool
 * (`StreamPool.default(device)`), from {@link StreamPool.forDevices}. `getStream()`, `acquire()`, `tryAcquire()` and
 * `run()` spread tasks round-robin over the devices, then over each device's streams; `stats()` reports each device's
 * pool. See Note [device spreading] in the source.
 *
 * Work on a stream runs on that stream's device, and memory allocated without an explicit stream inside `run()`
 * (`DeviceBuffer.alloc(bytes)`) lands on the leased stream's device. Data that a task needs from another device is
 * copied with `stream.copy()` (a peer copy) after `stream.waitStream()` / `stream.waitEvent()` on the producer.
 *
 * Lifetime: creates nothing and owns nothing. `destroy()` (or `[Symbol.dispose]`) detaches this group object only:
 * its later calls throw {@link DestroyedError}; the pools, their streams and leases already granted are untouched.
 * Detaching a device's default pool in this thread (`StreamPool.default(d).destroy()`) makes this group's calls that
 * reach that device throw {@link DestroyedError}; make a new group then.
 *
 * Thread-safety: a group object belongs to the thread that made it; other threads call `StreamPool.forDevices()`
 * themselves and get the same pools. The turns between devices are per group object; the streams of a device follow
 * its pool's sequence, shared by every thread.
 *
 * Follows: PyTorch's per-device stream pools (`getStreamFromPool(device)`), with the device choice made for the task.
 *
 * @example
 * ```ts
 * const group = StreamPool.forDevices();            // every visible device
 * const kernels = await Promise.all(group.devices.map(async (device) => (await Module.load(ptx, { device })).getFunction('scale', ['ptr', 'u32'])));
 * await Promise.all(tasks.map((task) => group.run(async (stream) => {
 *   using input = DeviceBuffer.from(task.values);    // on the leased stream's device
 *   kernels[group.devices.indexOf(stream.device)]!.launch({ grid: 256, block: 256 }, input, task.n);
 *   await stream.synchronize();
 * })));
 * ```
 */
export class StreamPoolGroup {
  readonly #core: Core;
  /** The devices, in the order the group walks them. */
  readonly devices: readonly Device[];

  private constructor(token: symbol, core: Core, devices: readonly Device[]) {
    checkConstruction(token, 'StreamPoolGroup', 'StreamPool.forDevices()');
    this.#core = core;
    this.devices = Object.freeze([...devices]);
    lockFields(this, ['devices']);
  }

  static {
    register(groups, { make: (core, devices) => new StreamPoolGroup(internalConstruction, core, devices) });
    guardReceivers(StreamPoolGroup, (value) => #core in value);
  }

  /** Hands out a shared stream: the n-th call on this group returns the next stream (in its pool's round-robin order)
   * of device n % D, where D is the number of devices; with `index`, stream `floor(index / D)` of device `index % D`,
   * the same one on every call. Creates nothing, never blocks, nothing to return; other tasks may use the same stream
   * at the same time (see `pool.getStream()`). Use {@link StreamPoolGroup.run} for a stream of one's own.
   * @param index - a non-negative safe integer.
   * @throws `TypeError` ERR_INVALID_ARG_TYPE / `RangeError` ERR_OUT_OF_RANGE for a bad `index`;
   * {@link DestroyedError} after `destroy()`, or (resource 'StreamPool') when the device's default pool was detached
   * in this thread. Thread-safety: the thread that made the group. */
  getStream(index?: number): Stream {
    return this.#core.getStream(index);
  }

  /** A lease on a free stream of the first device, starting with the device whose turn it is, that has one; or
   * `undefined` when every stream of every device is leased (or a device's pool has waiters of this thread ahead).
   * With `options.memoryBytes`, a device counts only while that budget fits its pool's `memoryLimitBytes` now (each
   * device's default pool has a limit of its own: CUDA_STREAM_POOL_MEMORY_LIMIT, or that device's total memory).
   * Never waits. The turn moves to the device after the one that granted the lease.
   * @throws {@link DestroyedError} after `destroy()`, or as `pool.tryAcquire()` of a device's pool (a budget above
   * a device's limit included). Thread-safety: the thread that made the group. */
  tryAcquire(options?: TryAcquireOptions): StreamLease | undefined {
    return this.#core.tryAcquire(options);
  }

  /** Resolves to a lease: at once on the first device, starting with the device whose turn it is, that has a free
   * stream; when every stream of every device is leased, the wait queues on the device whose turn it is (served first
   * come first served there) and the turn moves on. `options.memoryBytes` is a budget admitted by the device's pool, as
   * `pool.acquire()` admits it. Release the lease with `release()` or `using`; prefer {@link StreamPoolGroup.run}.
   * @throws never synchronously: rejects with `options.signal.reason` when the signal aborts first, `TypeError`
   * ERR_INVALID_ARG_TYPE / ERR_INVALID_ARG_VALUE for bad options, {@link DestroyedError} after `destroy()` or as
   * `pool.acquire()` of the device's pool. Thread-safety: the thread that made the group. */
  acquire(options?: AcquireOptions): Promise<StreamLease> {
    return this.#core.acquire(options);
  }

  /** Leases a stream as {@link StreamPoolGroup.acquire} does, runs `fn(stream)` with it as `currentStream()` (so
   * allocations, copies and launches without an explicit stream go to that stream and its device), releases the lease
   * however `fn` ends, and settles with `fn`'s outcome: its value, or the very error it threw. `options.signal` only
   * aborts the wait for a lease. Work `fn` queued still runs after release; await `stream.synchronize()` inside `fn`
   * to wait for it.
   * @throws never synchronously: rejects with `TypeError` ERR_INVALID_ARG_TYPE for a non-function `fn`, and as
   * {@link StreamPoolGroup.acquire}. Thread-safety: the thread that made the group.
   * @example
   * ```ts
   * const device = await group.run(async (stream) => { stream.copy(out, input); await stream.synchronize(); return stream.device.ordinal; });
   * ```
   */
  run<R>(fn: (stream: Stream) => R, options?: RunOptions): Promise<Awaited<R>> {
    return this.#core.run(fn, options);
  }

  /** Each device's `pool.stats()`, in the order of {@link StreamPoolGroup.devices}: hand-outs, leases and waiters
   * per stream, global across the threads sharing each default pool.
   * @throws {@link DestroyedError} after `destroy()`, or as `pool.stats()`. */
  stats(): StreamPoolStats[] {
    return this.#core.stats();
  }

  /** True after `destroy()`. */
  get destroyed(): boolean {
    return this.#core.destroyed;
  }

  /** Detaches this group object: its later calls throw {@link DestroyedError}. The pools, their streams and the leases
   * already granted stay as they are (they belong to the process). Idempotent; never throws. */
  destroy(): void {
    this.#core.destroy();
  }

  /** Same as {@link StreamPoolGroup.destroy}. */
  [Symbol.dispose](): void {
    this.destroy();
  }
}

/** A group over `members`, each device's pool, one per device in `devices`. @internal */
export function poolGroup(members: readonly PoolGroupMember<Stream, StreamLease, StreamPoolStats>[], devices: readonly Device[]): StreamPoolGroup {
  return groups.make(new GroupCore<Stream, StreamLease, StreamPoolStats>(members, enterScope), devices);
}
