// When the slot of a native reference in this thread's handle table is released if its object is never destroyed: once the object
// that owns it is collected. See Note [handle table] in src/internal/handle-table.h.
import { native, type NativeRef } from './binding.js';

/* Note [native ref nursery]: registering an object with a FinalizationRegistry costs about half a microsecond, as much as a
 * whole allocation or stream creation, and most such objects are destroyed soon after they are made. So adopt()
 * only notes the owner and its ref; the registry hears of an owner at the nursery's next flush, and only when its ref
 * was not released by then. A flush runs when NURSERY_LIMIT owners are waiting, or NURSERY_MS after the first of
 * them, from an unreferenced timer (so the nursery never keeps a process alive). Until its flush, an owner is held
 * strongly: a forgotten object is collected at most NURSERY_MS, or NURSERY_LIMIT objects, later than it otherwise
 * would be. */
const NURSERY_LIMIT = 1024;
const NURSERY_MS = 100;

const registry = new FinalizationRegistry<NativeRef>((ref) => {
  native.handleRelease(ref, true);
});
const owners: object[] = [];
// The owners' refs, by index; a flush overwrites those released already with 0 (no ref is 0).
const refs = new Float64Array(NURSERY_LIMIT);
let timer: ReturnType<typeof setTimeout> | undefined;

/** Registers every owner waiting in the nursery now, instead of at the next flush: for tests that collect garbage
 * and count what forgotten objects released. @internal */
export function flushNursery(): void {
  flush();
}

function flush(): void {
  if (timer !== undefined) clearTimeout(timer);
  timer = undefined;
  native.handleTrackAll(refs, owners.length);
  for (let i = 0; i < owners.length; i++) if (refs[i] !== 0) registry.register(owners[i]!, refs[i] as NativeRef);
  owners.length = 0;
}

/** Releases `ref`'s slot once `owner` is collected, unless something releases it first (the object's destroy, which
 * the native call does). Call once per ref, with the object whose lifetime is the ref's. @internal */
export function adopt(owner: object, ref: NativeRef): void {
  refs[owners.length] = ref;
  owners.push(owner);
  if (owners.length >= NURSERY_LIMIT) flush();
  else if (timer === undefined) timer = setTimeout(flush, NURSERY_MS).unref();
}

/** Says that `owner`'s ref was released by its destroy (free(), destroy()). The nursery's newest owner leaves it at
 * once: an object made and destroyed in turn (alloc then free) is then held by nothing, and dies young, where being
 * held until the next flush made it survive a scavenge and be copied. Others wait for the flush, which drops them.
 * @internal */
export function released(owner: object): void {
  if (owners.length !== 0 && owners[owners.length - 1] === owner) owners.pop();
}

/** Releases the slot of a ref this thread held only for a moment (a free's completion marker) once it is done with
 * it; the ref lives on while native code still uses it. @internal */
export function releaseRef(ref: NativeRef): void {
  native.handleRelease(ref, false);
}

/** This thread's live handles: refs that an object of this thread can still reach. For tests. @internal */
export function liveHandles(): number {
  return native.handleCount();
}
