// The soak's model of every live object a thread made: what exists, what was destroyed (kept a while, to call
// again and expect DestroyedError), how objects depend on each other, and the order that tears them down safely.
import type { DeviceBuffer, Event, Graph, GraphExec, Kernel, ManagedBuffer, Module, PinnedBuffer, Stream, StreamLease, StreamPool } from 'cuda-stream-pool';

import type { LeaseLedger } from './ledger.js';
import type { Random } from './random.js';

/** What every modelled object has: a serial number (in creation order), a label for step lines, and its state. */
export interface Entry {
  readonly serial: number;
  readonly label: string;
  alive: boolean;
}

/** How a stream wrapper came to be: `owned` (Stream.create), `borrowed` (Stream.fromHandle of an owned stream of
 * this model: its lender), `legacy`, `perThread`, `pool` (getStream) or `lease` (a lease's view). */
export type StreamKind = 'owned' | 'borrowed' | 'legacy' | 'perThread' | 'pool' | 'lease';

export interface StreamEntry extends Entry {
  readonly stream: Stream;
  readonly kind: StreamKind;
  /** For `borrowed`: the owned stream whose handle it wraps. It must be destroyed before its lender, since a
   * wrapper of a destroyed driver stream would pass a dead handle to the driver (fromHandle trusts its input). */
  readonly lender?: StreamEntry;
  readonly borrowers: Set<StreamEntry>;
  /** For `pool` and `lease`: the pool. */
  readonly pool?: PoolEntry;
}

export interface EventEntry extends Entry {
  readonly event: Event;
  readonly timing: boolean;
  recorded: boolean;
}

export interface BufferEntry extends Entry {
  readonly buffer: DeviceBuffer;
  /** A borrowed view (DeviceBuffer.attach): its free only retires the view. */
  readonly view: boolean;
}

export interface PinnedEntry extends Entry {
  readonly pinned: PinnedBuffer;
}

export interface PoolEntry extends Entry {
  readonly pool: StreamPool;
  /** Who holds each stream's lease, shared with every thread that uses the pool. */
  readonly ledger: LeaseLedger;
  /** The pool's stream ids by index, to find a lease's index. */
  readonly ids: readonly bigint[];
  /** True for the pool this thread created (destroy ends it everywhere); false for an attached or default one. */
  readonly owner: boolean;
  /** True for the pool shared with the workers: it lives until the teardown. */
  readonly longLived: boolean;
  /** acquire()/run() calls of this thread still waiting for a lease on this pool (Note [soak waits]). */
  waiting: number;
}

export interface LeaseEntry extends Entry {
  readonly lease: StreamLease;
  readonly pool: PoolEntry;
  readonly slot: number;
  /** The lease's stream, as a stream entry of kind `lease`. */
  readonly view: StreamEntry;
}

export interface ModuleEntry extends Entry {
  readonly module: Module;
  readonly spin: Kernel;
  readonly empty: Kernel;
  readonly fill: Kernel;
}

/** What a captured graph's fill_u32 launch writes: `value` into the first `words` u32 of `buffer`. */
export interface FillWork {
  readonly buffer: DeviceBuffer;
  readonly value: number;
  readonly words: number;
  /** The module whose kernels the work launches (its unload makes launches refused). */
  readonly module: ModuleEntry;
}

export interface GraphEntry extends Entry {
  readonly graph: Graph;
  readonly work: FillWork;
  /** Kernel nodes in capture order: `fill` alone, or `fill` then `empty` (another topology). */
  readonly shape: 'fill' | 'fill+empty';
}

export interface GraphExecEntry extends Entry {
  readonly exec: GraphExec;
  /** The graph whose work later launches run (the one instantiated, or the last update's). */
  latest: GraphEntry;
  /** What the fill node writes now: the latest graph's work, or what setKernelArguments gave it since. */
  work: FillWork;
}

export interface ManagedEntry extends Entry {
  readonly managed: ManagedBuffer;
}

/** The live and recently destroyed objects of one kind, at most `cap` live ones. */
export class Registry<E extends Entry> {
  readonly alive: E[] = [];
  readonly dead: E[] = [];

  /** @param cap - the most live objects; operations that create one skip while it is full.
   * @param deadCap - destroyed objects kept for use-after-destroy calls (the oldest go first). */
  constructor(
    readonly name: string,
    readonly cap: number,
    readonly deadCap = 16,
  ) {}

  get full(): boolean {
    return this.alive.length >= this.cap;
  }

  add(entry: E): E {
    this.alive.push(entry);
    return entry;
  }

  /** The entry was destroyed (freed, unloaded, released): it moves to the dead ones. */
  retire(entry: E): void {
    const at = this.alive.indexOf(entry);
    if (at < 0) return;
    this.alive.splice(at, 1);
    entry.alive = false;
    this.dead.push(entry);
    if (this.dead.length > this.deadCap) this.dead.shift();
  }

  /** The entry is forgotten without being destroyed (its finalizer is the library's business now). */
  drop(entry: E): void {
    const at = this.alive.indexOf(entry);
    if (at >= 0) this.alive.splice(at, 1);
    const record = entry as Partial<Record<'buffer' | 'stream' | 'event' | 'pinned' | 'pool' | 'lease' | 'module' | 'graph' | 'exec' | 'managed', object>>;
    const object = record.buffer ?? record.stream ?? record.event ?? record.pinned ?? record.pool ?? record.lease ?? record.module ?? record.graph ?? record.exec ?? record.managed;
    if (object) this.dropped.push({ label: entry.label, object: new WeakRef(object) });
  }

  /** The library objects of dropped entries, weakly: the ones still reachable at the end name what kept memory alive. */
  readonly dropped: { label: string; object: WeakRef<object> }[] = [];

  /** A live entry that passes `filter`, or undefined. */
  pick(random: Random, filter?: (entry: E) => boolean): E | undefined {
    const candidates = filter ? this.alive.filter(filter) : this.alive;
    return candidates.length === 0 ? undefined : random.pick(candidates);
  }

  /** A destroyed entry, or undefined. */
  pickDead(random: Random, filter?: (entry: E) => boolean): E | undefined {
    const candidates = filter ? this.dead.filter(filter) : this.dead;
    return candidates.length === 0 ? undefined : random.pick(candidates);
  }
}

/** Every object one thread made, by kind. */
export class Model {
  #serial = 0;
  readonly streams = new Registry<StreamEntry>('streams', 24);
  readonly events = new Registry<EventEntry>('events', 16);
  readonly buffers = new Registry<BufferEntry>('device buffers', 24);
  readonly pinned = new Registry<PinnedEntry>('pinned buffers', 8);
  readonly pools = new Registry<PoolEntry>('pools', 4);
  readonly leases = new Registry<LeaseEntry>('leases', 6);
  readonly modules = new Registry<ModuleEntry>('modules', 2, 4);
  readonly graphs = new Registry<GraphEntry>('graphs', 4);
  readonly graphExecs = new Registry<GraphExecEntry>('graph execs', 4);
  /** The device buffers that graphs write: apart from `buffers`, so that no other step writes them meanwhile. */
  readonly graphBuffers = new Registry<BufferEntry>('graph buffers', 8);
  readonly managed = new Registry<ManagedEntry>('managed buffers', 4);

  /** The next serial number, for a new entry. */
  serial(): number {
    return ++this.#serial;
  }

  /** Forgets the destroyed entries (the end of a seed): a dead subarray view holds its parent buffer, which may have
   * been dropped, so the collector can take everything only once these go. */
  forgetDead(): void {
    for (const registry of this.#all()) registry.dead.length = 0;
  }

  /** Labels of dropped entries that are still reachable (after a collection: a leak's suspects). */
  reachableDropped(): string[] {
    return this.#all().flatMap((registry) => registry.dropped.filter((d) => d.object.deref()).map((d) => d.label));
  }

  #all(): Registry<Entry>[] {
    return [this.streams, this.events, this.buffers, this.pinned, this.pools, this.leases, this.modules, this.graphs, this.graphExecs, this.graphBuffers, this.managed] as Registry<Entry>[];
  }

  /** Live objects per kind, for the closing tally. */
  counts(): Record<string, number> {
    return Object.fromEntries(this.#all().map((r) => [r.name, r.alive.length]));
  }

  /** Registers a stream wrapper; a `borrowed` one joins its lender's borrowers. */
  addStream(stream: Stream, kind: StreamKind, extra: { lender?: StreamEntry; pool?: PoolEntry } = {}): StreamEntry {
    const serial = this.serial();
    const entry: StreamEntry = { serial, label: `stream#${serial}(${kind})`, alive: true, stream, kind, borrowers: new Set(), ...extra };
    extra.lender?.borrowers.add(entry);
    return this.streams.add(entry);
  }

  /** Retires a stream entry; a borrowed one leaves its lender's borrowers. */
  retireStream(entry: StreamEntry): void {
    entry.lender?.borrowers.delete(entry);
    this.streams.retire(entry);
  }

  /** The live stream entries that belong to `pool` (its getStream() wrappers and lease views). */
  streamsOf(pool: PoolEntry): StreamEntry[] {
    return this.streams.alive.filter((s) => s.pool === pool);
  }

  /** The live leases on `pool`. */
  leasesOf(pool: PoolEntry): LeaseEntry[] {
    return this.leases.alive.filter((l) => l.pool === pool);
  }

  /** The order that destroys everything without using a dead handle: leases first (their pools wait for them),
   * borrowed streams before their lenders, graph execs and graphs, memory before streams (frees are ordered on
   * streams), modules, pools (the long-lived one last; a pool's end retires its stream wrappers), then owned streams. */
  teardownOrder(): TeardownItem[] {
    const streams = this.streams.alive;
    return [
      ...this.leases.alive.map((entry) => ({ what: 'lease', entry }) as const),
      ...streams.filter((s) => s.kind === 'borrowed').map((entry) => ({ what: 'stream', entry }) as const),
      ...this.graphExecs.alive.map((entry) => ({ what: 'graphExec', entry }) as const),
      ...this.graphs.alive.map((entry) => ({ what: 'graph', entry }) as const),
      ...this.graphBuffers.alive.map((entry) => ({ what: 'graphBuffer', entry }) as const),
      ...this.managed.alive.map((entry) => ({ what: 'managed', entry }) as const),
      ...this.buffers.alive.filter((b) => b.view).map((entry) => ({ what: 'buffer', entry }) as const),
      ...this.buffers.alive.filter((b) => !b.view).map((entry) => ({ what: 'buffer', entry }) as const),
      ...this.pinned.alive.map((entry) => ({ what: 'pinned', entry }) as const),
      ...this.events.alive.map((entry) => ({ what: 'event', entry }) as const),
      ...this.modules.alive.map((entry) => ({ what: 'module', entry }) as const),
      ...streams.filter((s) => s.kind === 'legacy' || s.kind === 'perThread').map((entry) => ({ what: 'stream', entry }) as const),
      ...this.pools.alive.filter((p) => !p.longLived).map((entry) => ({ what: 'pool', entry }) as const),
      ...this.pools.alive.filter((p) => p.longLived).map((entry) => ({ what: 'pool', entry }) as const),
      ...streams.filter((s) => s.kind === 'owned').map((entry) => ({ what: 'stream', entry }) as const),
    ];
  }
}

/** One step of the teardown: what to end, and how its kind ends. */
export type TeardownItem =
  | { what: 'lease'; entry: LeaseEntry }
  | { what: 'stream'; entry: StreamEntry }
  | { what: 'buffer'; entry: BufferEntry }
  | { what: 'graphBuffer'; entry: BufferEntry }
  | { what: 'pinned'; entry: PinnedEntry }
  | { what: 'event'; entry: EventEntry }
  | { what: 'module'; entry: ModuleEntry }
  | { what: 'graph'; entry: GraphEntry }
  | { what: 'graphExec'; entry: GraphExecEntry }
  | { what: 'managed'; entry: ManagedEntry }
  | { what: 'pool'; entry: PoolEntry };
