// The stream pool's shared words: the one specification of their layout and of the transitions made on them. The
// policy (pool/pool-policy.ts) makes the JS transitions; the native pool (pool/pool.cc) receives poolLayout()
// by name at creation and makes the two native ones (destroy, thread exit). Neither side has numbers of its own.

/* Note [pool shared words]: one Int32Array that every thread sharing a pool sees (a SharedArrayBuffer over one
 * native block, Note [one backing store] in pool/pool.cc).
 *
 * Layout (word indices):
 *   STATE (0)           OPEN, CLOSING or DESTROYED; plain reads are enough for the checks in getStream().
 *   NEXT (1)            the round-robin counter, read as Uint32 (Note [pool hand-out] in pool/pool.ts).
 *   WRAPS (2)           how many times NEXT was wound back, for stats().
 *   -- words 16.. sit on their own cache line, away from the hot counter --
 *   WAITING_ENVS (16)   registered entries of the waiting table.
 *   CURSOR (17)         the table entry to serve next, so releases rotate among waiting threads.
 *   CLOSE_BELL (18)     bumped and notified when a lease comes back while the pool closes.
 *   ATTACHED_ENVS (19)  how many environments (threads) hold a handle on the pool; written by the native side
 *                       alone (Note [pool attachments] in pool/pool.cc); 0 over words made in JS (tests).
 *   RECLAIMED (20)      leases given back because they became unreachable unreleased, for stats().
 *   MEMORY_LOCK (21)    0, or the environment that is admitting a memory budget now (Note [memory admission] in
 *                       pool/pool-policy.ts).
 *   MEMORY_TURN (22)    0, or the environment whose first waiter is the first in line for memory.
 *   MEMORY_LIMIT (24)   a BigInt64 over words 24 and 25: the sum of admitted budgets may not pass it (bytes); set
 *                       once, by the first handle made on the words, and 0 until then.
 *   leases (32..)       `size` lease words, one per stream (below).
 *   leaseCounts         `size` words (Uint32): leases granted per stream, for stats().
 *   explicit            `size` words (Uint32): getStream(index) calls per stream, for stats().
 *   idleAt              `size` words (Uint32): NEXT when the stream was last known idle, or UNKNOWN_IDLE
 *                       (Note [known idle] in pool/pool-policy.ts).
 *   idleExplicit        `size` words (Uint32): the stream's explicit count at that moment.
 *   budgets             `size` BigInt64s (two words each, 8-byte aligned): the memory budget of the lease that holds
 *                       each stream's lease word (bytes), 0 when it holds none or no lease does.
 *   waiting table       ENV_ENTRIES entries of ENV_STRIDE words: [environment id or 0, wake counter, waiters,
 *                       memory waiters]. A thread whose first waiter holds a stream and waits for memory publishes
 *                       its waiters as memory waiters and 0 waiters, so that no stream is handed to it meanwhile.
 *
 * A lease word is 0 (free), +e (held by environment e) or -e (handed to e, not claimed yet). Environment ids are
 * positive and never reused in a process. Every change is one Atomics operation; these are all of them:
 *   take       0 -> +e       compareExchange by e.
 *   claim      -e -> +e      compareExchange by e (while waiting, or when it stops waiting).
 *   free       +e -> 0       store by e, when nobody waits for the stream.
 *   hand-off   +e -> -t      store by e, t read from a registered entry; then e re-reads that entry and, if it no
 *                            longer names t, takes the word back (-t -> +e, compareExchange) and tries again.
 *   reclaim    -t -> +e      compareExchange by any e that finds no registered entry naming t: a stale hand-off.
 *   thread exit ±e -> 0       compareExchange by the native cleanup hook of e's environment (its JS has stopped),
 *                            after it zeroed that stream's budget; it also frees MEMORY_LOCK and MEMORY_TURN if e
 *                            holds them.
 *   destroy    STATE := DESTROYED, by the owner (JS, then native); every later transition is void.
 * A waiting-table entry goes 0 -> e (register: compareExchange, then waiters, then WAITING_ENVS + 1) and back
 * e -> 0 (unregister: waiters := 0, compareExchange, WAITING_ENVS - 1); its wake counter only grows.
 *
 * A stream's budget is written by the holder of its lease word alone: set under MEMORY_LOCK when a budget is admitted,
 * zeroed before the word is freed or handed off. So the admitted sum is the sum of the budgets, and a thread that
 * dies gives its budgets back with its words.
 *
 * The ordering rule that keeps a lease from being lost: whoever unregisters e (e when it stops waiting, the cleanup
 * hook when e dies) unregisters first and only then sweeps the -e words (claims them, or frees them); a hand-off
 * writes -t first and only then re-reads t's entry. Either the re-read still sees t, and then the sweep comes later
 * and sees -t; or it does not, and the hand-off takes the word back. Reclaim heals any -t left behind all the same,
 * so a lease never stays with a thread that is gone.
 */
export const STATE = 0;
export const NEXT = 1;
export const WRAPS = 2;
export const WAITING_ENVS = 16;
export const CURSOR = 17;
export const CLOSE_BELL = 18;
export const ATTACHED_ENVS = 19;
export const RECLAIMED = 20;
export const MEMORY_LOCK = 21;
export const MEMORY_TURN = 22;
/** The index of MEMORY_LIMIT in a BigInt64Array over the same buffer (word 24). */
export const MEMORY_LIMIT_INDEX = 12;
export const OPEN = 0;
export const CLOSING = 1;
export const DESTROYED = 2;
/** Threads that can wait on one pool at once with direct hand-over; more still get streams, by polling. */
export const ENV_ENTRIES = 128;
export const ENV_STRIDE = 4;
export const ENV_WAKE_COUNTER = 1;
export const ENV_WAITERS = 2;
export const ENV_MEMORY_WAITERS = 3;
/** idleAt value of a stream whose idleness is not known. */
export const UNKNOWN_IDLE = 0xffffffff;
const LEASE_BASE = 32;
const CACHE_LINE_WORDS = 16;

/** Where a pool of `size` streams keeps its words (Note [pool shared words]); the native pool reads these fields
 * by name. */
export interface PoolLayout {
  /** Streams: 1 to 1024. */
  size: number;
  /** Total Int32 words. */
  words: number;
  /** Index of STATE. */
  state: number;
  /** The value of STATE once the pool is destroyed. */
  destroyed: number;
  /** Index of WAITING_ENVS. */
  waitingEnvs: number;
  /** Index of ATTACHED_ENVS. */
  attachedEnvs: number;
  /** Index of the first lease word; one per stream. */
  leaseBase: number;
  /** Index of the first lease counter; one per stream. */
  leaseCountBase: number;
  /** Index of the first getStream(index) counter; one per stream. */
  explicitBase: number;
  /** Index of the first idleAt word; one per stream. */
  idleAtBase: number;
  /** Index of the first idleExplicit word; one per stream. */
  idleExplicitBase: number;
  /** Index of the first budget word, even; two per stream (a BigInt64 each). */
  budgetBase: number;
  /** Index of MEMORY_LOCK. */
  memoryLock: number;
  /** Index of MEMORY_TURN. */
  memoryTurn: number;
  /** Index of the waiting table's first entry (on a cache line of its own). */
  envBase: number;
  /** Entries in the waiting table. */
  envEntries: number;
  /** Words per entry. */
  envStride: number;
  /** Offset of an entry's wake counter from its first word (the environment id). */
  envWakeCounter: number;
  /** Offset of an entry's waiter count from its first word. */
  envWaiters: number;
  /** Offset of an entry's memory waiter count from its first word. */
  envMemoryWaiters: number;
}

/** The layout for `size` streams (1 to 1024). */
export function poolLayout(size: number): PoolLayout {
  const leaseCountBase = LEASE_BASE + size;
  const explicitBase = leaseCountBase + size;
  const idleAtBase = explicitBase + size;
  const idleExplicitBase = idleAtBase + size;
  const budgetBase = Math.ceil((idleExplicitBase + size) / 2) * 2;
  const envBase = Math.ceil((budgetBase + 2 * size) / CACHE_LINE_WORDS) * CACHE_LINE_WORDS;
  return {
    size,
    words: envBase + ENV_ENTRIES * ENV_STRIDE,
    state: STATE,
    destroyed: DESTROYED,
    waitingEnvs: WAITING_ENVS,
    attachedEnvs: ATTACHED_ENVS,
    leaseBase: LEASE_BASE,
    leaseCountBase,
    explicitBase,
    idleAtBase,
    idleExplicitBase,
    budgetBase,
    memoryLock: MEMORY_LOCK,
    memoryTurn: MEMORY_TURN,
    envBase,
    envEntries: ENV_ENTRIES,
    envStride: ENV_STRIDE,
    envWakeCounter: ENV_WAKE_COUNTER,
    envWaiters: ENV_WAITERS,
    envMemoryWaiters: ENV_MEMORY_WAITERS,
  };
}
