// Soak operations on stream pools: private, default and shared (attached) pools; getStream, leases (acquire,
// tryAcquire, run) checked against the cross-thread lease ledger, aborts, stats, destroy and close, and every method
// after destroy. Waits for leases follow Note [soak waits] in test/soak/context.ts.
import { currentStream, DestroyedError, StreamLease, StreamPool, type Stream } from 'cuda-stream-pool';

import { describeError, SoakFailure } from '../check.js';
import type { Context, Outcome } from '../context.js';
import { DoubleLeaseError, LeaseLedger } from '../ledger.js';
import type { LeaseEntry, PoolEntry } from '../model.js';
import type { InvalidCase, Operation } from '../operation.js';

/** Registers a pool this thread created, attached or took as the default. */
export function addPool(ctx: Context, pool: StreamPool, options: { owner: boolean; longLived: boolean; ledger: LeaseLedger; label: string }): PoolEntry {
  if (options.ledger.streams !== pool.size) throw new Error(`the ledger has ${options.ledger.streams} streams, the pool ${pool.size}`);
  const ids = Array.from({ length: pool.size }, (_, i) => pool.getStream(i).id);
  const serial = ctx.model.serial();
  const { owner, longLived, ledger } = options;
  return ctx.model.pools.add({ serial, label: `pool#${serial}(${options.label}, ${pool.size})`, alive: true, pool, ids, waiting: 0, owner, longLived, ledger });
}

/** Records a lease the library granted: the ledger's claim (a stream held twice fails here), then the model. */
export function grant(ctx: Context, entry: PoolEntry, lease: StreamLease, how: string): LeaseEntry {
  const stream = lease.stream;
  const slot = entry.ids.indexOf(stream.id);
  if (slot < 0) throw new SoakFailure(`${how} on ${entry.label} gave stream id ${stream.id}, which is not one of the pool's`);
  entry.ledger.claim(slot, ctx.thread, `${how} on ${entry.label}`);
  const view = ctx.model.addStream(stream, 'lease', { pool: entry });
  const serial = ctx.model.serial();
  return ctx.model.leases.add({ serial, label: `lease#${serial}(${entry.label} stream ${slot})`, alive: true, lease, pool: entry, slot, view });
}

/** Releases a lease: the ledger first (once released, another holder may claim the stream at once). */
export function releaseLease(ctx: Context, entry: LeaseEntry): void {
  entry.pool.ledger.unclaim(entry.slot, ctx.thread, `release of ${entry.label}`);
  entry.lease.release();
  ctx.model.leases.retire(entry);
  ctx.model.retireStream(entry.view);
}

/** Releases every lease this thread holds, on every pool (before awaiting a lease: Note [soak waits]). */
export function releaseEverything(ctx: Context): number {
  const leases = [...ctx.model.leases.alive];
  for (const lease of leases) releaseLease(ctx, lease);
  return leases.length;
}

/** Ends a pool for this thread: `destroy` or `close` (awaited). The owner's end destroys it everywhere (its streams
 * then throw DestroyedError); an attached or default pool only detaches this thread (its stream wrappers are
 * forgotten). */
export async function endPool(ctx: Context, entry: PoolEntry, how: 'destroy' | 'close'): Promise<void> {
  const leases = ctx.model.leasesOf(entry);
  if (how === 'close') {
    const closing = entry.pool.close();
    for (const lease of leases) releaseLease(ctx, lease);
    await ctx.within(closing, `${entry.label}.close()`);
  } else {
    for (const lease of leases) entry.ledger.unclaim(lease.slot, ctx.thread, `${entry.label}.destroy() with ${lease.label}`);
    entry.pool.destroy();
    for (const lease of leases) {
      if (!lease.lease.released) throw new SoakFailure(`${lease.label} is not released after ${entry.label}.destroy()`);
      ctx.model.leases.retire(lease);
    }
  }
  if (!entry.pool.destroyed) throw new SoakFailure(`${entry.label}.destroyed is false after ${how}()`);
  ctx.model.pools.retire(entry);
  for (const stream of ctx.model.streamsOf(entry)) {
    if (entry.owner) ctx.model.retireStream(stream);
    else ctx.model.streams.drop(stream);
  }
}

/** What a lease wait may end with: a lease (granted to the model by then), the abort's reason, or DestroyedError
 * once the pool ended for this thread. */
function leaseCheck(entry: PoolEntry, signal: AbortSignal | undefined) {
  return (outcome: Outcome): string | undefined => {
    if (outcome.ok) return outcome.value instanceof StreamLease ? undefined : `resolved with ${String(outcome.value)}, not a StreamLease`;
    if (signal?.aborted && outcome.error === signal.reason) return undefined;
    if (outcome.error instanceof DestroyedError && !entry.alive) return undefined;
    return `rejected with ${describeError(outcome.error)}`;
  };
}

/** Starts acquire(): the lease enters the ledger and the model as soon as it is granted. */
function acquire(ctx: Context, entry: PoolEntry, signal: AbortSignal | undefined, how: string): Promise<StreamLease> {
  entry.waiting++;
  ctx.leaseWaits++;
  return entry.pool.acquire(signal ? { signal } : undefined).then(
    (lease) => {
      entry.waiting--;
      ctx.leaseWaits--;
      if (!entry.alive) {
        if (!lease.released) ctx.fail(`${how}: a lease granted by ${entry.label} is not released although the pool ended here`);
        return lease;
      }
      try {
        grant(ctx, entry, lease, how);
      } catch (error) {
        ctx.fail(error instanceof Error ? error.message : String(error));
      }
      return lease;
    },
    (error: unknown) => {
      entry.waiting--;
      ctx.leaseWaits--;
      throw error;
    },
  );
}

interface RunPlan {
  value: number;
  throws: boolean;
  synchronize: boolean;
}

/** Starts run(fn): fn claims its stream in the ledger, checks currentStream(), queries or awaits the stream, and
 * returns `value` or throws its own error. */
function run(ctx: Context, entry: PoolEntry, plan: RunPlan, own: Error, signal: AbortSignal | undefined, how: string): Promise<unknown> {
  entry.waiting++;
  ctx.leaseWaits++;
  let started = false;
  const granted = () => {
    if (started) return;
    started = true;
    entry.waiting--;
    ctx.leaseWaits--;
  };
  const fn = async (stream: Stream) => {
    granted();
    const slot = entry.ids.indexOf(stream.id);
    entry.ledger.claim(slot, ctx.thread, `${how} on ${entry.label}`);
    try {
      if (currentStream(entry.pool.device) !== stream) throw new SoakFailure(`${how}: currentStream() inside run() is not the lease's stream`);
      if (plan.synchronize) await stream.synchronize();
      else stream.query();
      if (plan.throws) throw own;
      return plan.value;
    } finally {
      entry.ledger.unclaim(slot, ctx.thread, `${how} on ${entry.label} returning`);
    }
  };
  return entry.pool.run(fn, signal ? { signal } : undefined).finally(granted);
}

function runCheck(entry: PoolEntry, plan: RunPlan, own: Error, signal: AbortSignal | undefined) {
  return (outcome: Outcome): string | undefined => {
    if (outcome.ok) return !plan.throws && outcome.value === plan.value ? undefined : `resolved with ${String(outcome.value)}`;
    if (plan.throws && outcome.error === own) return undefined;
    if (signal?.aborted && outcome.error === signal.reason) return undefined;
    if (outcome.error instanceof DestroyedError && !entry.alive) return undefined;
    if (outcome.error instanceof DoubleLeaseError || outcome.error instanceof SoakFailure) return outcome.error.message;
    return `rejected with ${describeError(outcome.error)}`;
  };
}

const pick = (ctx: Context, filter?: (p: PoolEntry) => boolean) => ctx.model.pools.pick(ctx.random, filter);

export const poolOperations: Operation[] = [
  {
    name: 'pool.create',
    weight: 1.5,
    threads: 'any',
    plan(ctx) {
      if (ctx.model.pools.full) return undefined;
      const size = ctx.random.int(1, 6);
      const nonBlocking = ctx.random.chance(0.8);
      const priority = ctx.random.pick([0, -1, -3]);
      return {
        text: `new StreamPool({ size: ${size}, nonBlocking: ${nonBlocking}, priority: ${priority} })`,
        run() {
          const pool = new StreamPool({ size, nonBlocking, priority });
          addPool(ctx, pool, { owner: true, longLived: false, ledger: new LeaseLedger(size), label: 'private' });
        },
      };
    },
  },
  {
    name: 'pool.default',
    weight: 0.5,
    threads: 'any',
    plan(ctx) {
      if (ctx.model.pools.full || !ctx.defaultLedger) return undefined;
      const ledger = ctx.defaultLedger;
      return {
        text: 'StreamPool.default()',
        run() {
          const pool = StreamPool.default();
          if (StreamPool.default() !== pool) throw new SoakFailure('StreamPool.default() gave two objects in one thread');
          if (!ctx.model.pools.alive.some((p) => p.pool === pool)) addPool(ctx, pool, { owner: false, longLived: false, ledger, label: 'default' });
        },
      };
    },
  },
  {
    name: 'pool.attachShared',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      const shared = ctx.sharedPool;
      if (!shared) return undefined;
      const known = ctx.model.pools.alive.find((p) => p.ledger === shared.ledger);
      if (!known && ctx.model.pools.full) return undefined;
      return {
        text: `StreamPool.attach(shared pool ${shared.record.id})${known ? ` (already ${known.label})` : ''}`,
        run() {
          const pool = StreamPool.attach(shared.record);
          if (known) {
            if (pool !== known.pool) throw new SoakFailure(`StreamPool.attach() in a thread that has ${known.label} gave another object`);
            return;
          }
          addPool(ctx, pool, { owner: false, longLived: false, ledger: shared.ledger, label: 'attached' });
        },
      };
    },
  },
  {
    name: 'pool.getStream',
    weight: 4,
    threads: 'any',
    plan(ctx) {
      const entry = pick(ctx);
      if (!entry) return undefined;
      const index = ctx.random.chance(0.5) ? ctx.random.int(0, 3 * entry.pool.size) : undefined;
      const keep = !ctx.model.streams.full && ctx.random.chance(0.5);
      return {
        text: `${entry.label}.getStream(${index ?? ''})${keep ? ' kept' : ''}`,
        run() {
          const stream = entry.pool.getStream(index);
          if (index !== undefined && stream.id !== entry.ids[index % entry.pool.size])
            throw new SoakFailure(`getStream(${index}) gave stream id ${stream.id}, expected ${entry.ids[index % entry.pool.size]}`);
          if (!entry.ids.includes(stream.id)) throw new SoakFailure(`getStream() gave stream id ${stream.id}, not one of the pool's`);
          if (keep) ctx.model.addStream(stream, 'pool', { pool: entry });
        },
      };
    },
  },
  {
    name: 'pool.tryAcquire',
    weight: 4,
    threads: 'any',
    plan(ctx) {
      const entry = pick(ctx);
      if (!entry) return undefined;
      return {
        text: `${entry.label}.tryAcquire()`,
        run() {
          const lease = entry.pool.tryAcquire();
          if (lease !== undefined) grant(ctx, entry, lease, 'tryAcquire()');
        },
      };
    },
  },
  {
    name: 'pool.acquire',
    weight: 4,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.leaseWaits === 0 ? pick(ctx) : undefined;
      if (!entry) return undefined;
      const pending = ctx.random.chance(0.5);
      const abort = ctx.random.chance(0.25);
      return {
        text: `${entry.label}.acquire(${abort ? '{ signal } aborted at once' : ''})${pending ? ' pending' : ' awaited (every lease held released first)'}`,
        async run() {
          const controller = abort ? new AbortController() : undefined;
          if (!pending) releaseEverything(ctx);
          const waiting = acquire(ctx, entry, controller?.signal, 'acquire()');
          controller?.abort(new Error(`soak abort at step ${ctx.step}`));
          if (pending) return ctx.track(`${entry.label}.acquire()`, waiting, leaseCheck(entry, controller?.signal), entry);
          const outcome = await ctx.within(
            waiting.then((value) => ({ ok: true, value }) as Outcome, (error: unknown) => ({ ok: false, error }) as Outcome),
            `${entry.label}.acquire()`,
          );
          const problem = leaseCheck(entry, controller?.signal)(outcome);
          if (problem) throw new SoakFailure(`${entry.label}.acquire() ${problem}`);
        },
      };
    },
  },
  {
    name: 'pool.run',
    weight: 4,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.leaseWaits === 0 ? pick(ctx) : undefined;
      if (!entry) return undefined;
      const pending = ctx.random.chance(0.4);
      const abort = ctx.random.chance(0.15);
      const plan: RunPlan = { value: ctx.random.int(0, 1000), throws: ctx.random.chance(0.2), synchronize: ctx.random.chance(0.5) };
      return {
        text: `${entry.label}.run(fn ${plan.throws ? 'throwing its own error' : `returning ${plan.value}`}${plan.synchronize ? ', awaiting its stream' : ''})${abort ? ' { signal } aborted at once' : ''}${pending ? ' pending' : ' awaited (every lease held released first)'}`,
        async run() {
          const own = new Error(`fn's own error at step ${ctx.step}`);
          const controller = abort ? new AbortController() : undefined;
          if (!pending) releaseEverything(ctx);
          const running = run(ctx, entry, plan, own, controller?.signal, 'run()');
          controller?.abort(new Error(`soak abort at step ${ctx.step}`));
          const check = runCheck(entry, plan, own, controller?.signal);
          if (pending) return ctx.track(`${entry.label}.run()`, running, check, entry);
          const outcome = await ctx.within(
            running.then((value) => ({ ok: true, value }) as Outcome, (error: unknown) => ({ ok: false, error }) as Outcome),
            `${entry.label}.run()`,
          );
          const problem = check(outcome);
          if (problem) throw new SoakFailure(`${entry.label}.run() ${problem}`);
        },
      };
    },
  },
  {
    name: 'lease.release',
    weight: 5,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.leases.pick(ctx.random);
      if (!entry) return undefined;
      return {
        text: `${entry.label}.release()`,
        run() {
          releaseLease(ctx, entry);
          entry.lease.release(); // idempotent
          if (!entry.lease.released) throw new SoakFailure('released is false after release()');
        },
      };
    },
  },
  {
    name: 'lease.afterRelease',
    weight: 2,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.leases.pickDead(ctx.random);
      if (!entry) return undefined;
      const viaStream = ctx.random.chance(0.5);
      return {
        text: viaStream ? `${entry.view.label} (its lease released).query()` : `${entry.label} (released).stream`,
        run() {
          if (viaStream) return ctx.invalid(`${entry.view.label}.query() after its lease ended`, ['destroyed'], () => entry.view.stream.query());
          ctx.invalid(`${entry.label}.stream after release`, ['destroyed'], () => entry.lease.stream);
        },
      };
    },
  },
  {
    name: 'pool.stats',
    weight: 2,
    threads: 'any',
    plan(ctx) {
      const entry = pick(ctx);
      if (!entry) return undefined;
      return {
        text: `${entry.label}.stats()`,
        run() {
          const stats = entry.pool.stats();
          const own = ctx.model.leasesOf(entry).length;
          const problems = [
            stats.size !== entry.pool.size && `size ${stats.size}`,
            stats.handOuts.length !== stats.size && `${stats.handOuts.length} handOuts`,
            stats.leaseCounts.length !== stats.size && `${stats.leaseCounts.length} leaseCounts`,
            !(stats.leased >= own && stats.leased <= stats.size) && `leased ${stats.leased} with ${own} leases held here`,
            !(stats.waiters >= 0) && `waiters ${stats.waiters}`,
            !(stats.maxConnections >= 1 && stats.maxConnections <= 32) && `maxConnections ${stats.maxConnections}`,
          ].filter(Boolean);
          if (problems.length) throw new SoakFailure(`${entry.label}.stats(): ${problems.join(', ')}`);
        },
      };
    },
  },
  {
    name: 'pool.shareSelf',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      const entry = pick(ctx, (p) => p.owner);
      if (!entry) return undefined;
      return {
        text: `StreamPool.attach(${entry.label}.share()) in its own thread`,
        run() {
          if (StreamPool.attach(entry.pool.share()) !== entry.pool) throw new SoakFailure('attach() in the creating thread gave another object');
        },
      };
    },
  },
  {
    name: 'pool.end',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      const entry = pick(ctx, (p) => !p.longLived);
      if (!entry) return undefined;
      const how = ctx.random.pick(['destroy', 'close'] as const);
      const leases = ctx.model.leasesOf(entry).length;
      return {
        text: `${entry.label}.${how}() (${entry.owner ? 'owner: everywhere' : 'detach'}; ${leases} leases held, ${entry.waiting} waiting)`,
        run: () => endPool(ctx, entry, how),
      };
    },
  },
  {
    name: 'pool.afterEnd',
    weight: 2,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.pools.pickDead(ctx.random);
      if (!entry) return undefined;
      const method = ctx.random.pick(['getStream', 'tryAcquire', 'stats', 'share', 'acquire', 'run', 'destroy'] as const);
      return {
        text: `${entry.label} (ended).${method}()`,
        async run() {
          const p = entry.pool;
          const what = `${entry.label}.${method}() after its end`;
          switch (method) {
            case 'getStream':
              return ctx.invalid(what, ['destroyed'], () => p.getStream());
            case 'tryAcquire':
              return ctx.invalid(what, ['destroyed'], () => p.tryAcquire());
            case 'stats':
              return ctx.invalid(what, ['destroyed'], () => p.stats());
            case 'share':
              return ctx.invalid(what, ['destroyed'], () => p.share());
            case 'acquire':
              return ctx.invalidAsync(what, ['destroyed'], p.acquire());
            case 'run':
              return ctx.invalidAsync(what, ['destroyed'], p.run(() => 1));
            case 'destroy':
              p.destroy(); // idempotent, never throws
              return;
          }
        },
      };
    },
  },
  {
    name: 'pool.invalid',
    weight: 2,
    threads: 'any',
    plan(ctx) {
      const entry = pick(ctx);
      const cases: InvalidCase[] = [
        ['new StreamPool({ size: 0 })', ['range'], () => new StreamPool({ size: 0 })],
        ['new StreamPool({ size: 2000 })', ['range'], () => new StreamPool({ size: 2000 })],
        ['new StreamPool({ sise: 4 })', ['value'], () => new StreamPool({ sise: 4 } as never)],
        ['new StreamPool({ nonBlocking: "no" })', ['type'], () => new StreamPool({ nonBlocking: 'no' as never })],
        ['StreamPool.attach({})', ['type'], () => StreamPool.attach({} as never)],
        ['StreamPool.attach({ kind, id: 2 ** 40 }) (no such pool)', ['type', 'destroyed', 'value', 'range'], () => StreamPool.attach({ kind: 'cuda-stream-pool:StreamPool', id: 2 ** 40, device: 0, size: 1 })],
      ];
      if (entry) {
        const p = entry.pool;
        cases.push(
          [`${entry.label}.getStream(-1)`, ['range'], () => p.getStream(-1)],
          [`${entry.label}.getStream(1.5)`, ['range'], () => p.getStream(1.5)],
          [`${entry.label}.getStream("1")`, ['type'], () => p.getStream('1' as never)],
          [`${entry.label}.acquire({ signal: 42 })`, ['type'], () => p.acquire({ signal: 42 as never })],
          [`${entry.label}.acquire({ signl })`, ['value'], () => p.acquire({ signl: undefined } as never)],
          [`${entry.label}.run(42)`, ['type'], () => p.run(42 as never)],
        );
      }
      const [text, kinds, fn] = ctx.random.pick(cases);
      const rejects = /acquire|run/.test(text);
      return { text, run: () => (rejects ? ctx.invalidAsync(text, kinds, fn() as Promise<unknown>) : ctx.invalid(text, kinds, fn)) };
    },
  },
];
