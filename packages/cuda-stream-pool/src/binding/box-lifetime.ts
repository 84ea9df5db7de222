// When the slot of a box in this thread's handle table is released if its object is never destroyed: once the object
// that owns it is collected. See Note [handle table] in src/internal/handle-table.h.
import { native, type Box } from './binding.js';

/* Note [box nursery]: registering an object with a FinalizationRegistry costs about half a microsecond, as much as a
 * whole allocation or stream creation, and most such objects are destroyed soon after they are made. So adopt()
 * only notes the owner and its box; the registry hears of an owner at the nursery's next flush, and only when its box
 * was not released by then. A flush runs when NURSERY_LIMIT owners are waiting, or NURSERY_MS after the first of
 * them, from an unreferenced timer (so the nursery never keeps a process alive). Until its flush, an owner is held
 * strongly: a forgotten object is collected at most NURSERY_MS, or NURSERY_LIMIT objects, later than it otherwise
 * would be. */
const NURSERY_LIMIT = 1024;
const NURSERY_MS = 100;

const registry = new FinalizationRegistry<Box>((box) => {
  native.handleRelease(box, true);
});
const owners: object[] = [];
const boxes: Box[] = [];
let timer: ReturnType<typeof setTimeout> | undefined;

/** Registers every owner waiting in the nursery now, instead of at the next flush: for tests that collect garbage
 * and count what forgotten objects released. @internal */
export function flushNursery(): void {
  flush();
}

function flush(): void {
  if (timer !== undefined) clearTimeout(timer);
  timer = undefined;
  for (let i = 0; i < owners.length; i++) if (native.handleTrack(boxes[i]!)) registry.register(owners[i]!, boxes[i]!);
  owners.length = 0;
  boxes.length = 0;
}

/** Releases `box`'s slot once `owner` is collected, unless something releases it first (the object's destroy, which
 * the native call does). Call once per box, with the object whose lifetime is the box's. @internal */
export function adopt(owner: object, box: Box): void {
  owners.push(owner);
  boxes.push(box);
  if (owners.length >= NURSERY_LIMIT) flush();
  else if (timer === undefined) timer = setTimeout(flush, NURSERY_MS).unref();
}

/** Releases the slot of a box this thread held only for a moment (a free's completion marker) once it is done with
 * it; the box lives on while native code still uses it. @internal */
export function releaseBox(box: Box): void {
  native.handleRelease(box, false);
}

/** This thread's live handles: boxes that an object of this thread can still reach. For tests. @internal */
export function liveHandles(): number {
  return native.handleCount();
}
