// One thread's soak: random steps until told to stop, each written to the heartbeat before it runs and checked
// after, then a teardown that ends every object the thread still has, in a safe order.
import { describeError, SoakFailure } from './check.js';
import { untypedStack, type Context } from './context.js';
import type { Operation, Planned } from './operation.js';
import { destroyStream } from './operations/streams.js';
import { endPool, releaseLease } from './operations/pools.js';
import { settle } from './operations/misc.js';

/** Pending waits beyond which the next step settles them first. */
const MAX_PENDING = 24;

const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Starts one step: counts it, writes its line to the heartbeat (and to stdout when `verbose`). */
export function beginStep(ctx: Context, line: string, verbose: boolean): void {
  ctx.step++;
  const text = `#${ctx.step} ${line}`;
  ctx.heartbeat.begin(ctx.step, text);
  if (verbose) console.log(text);
}

/** Runs random steps from `table` that apply to this thread until `stop()` is true. A failing check, a valid call
 * that throws, or a failure recorded meanwhile ends it with a SoakFailure. */
export async function runSteps(ctx: Context, table: readonly Operation[], stop: () => boolean, verbose = false): Promise<void> {
  const mine = table.filter((op) => op.weight > 0 && (op.threads === 'any' || op.threads === (ctx.isMain ? 'main' : 'worker')));
  while (!stop()) {
    let op: Operation | undefined;
    let planned: Planned | undefined;
    if (ctx.pending.length >= MAX_PENDING) {
      op = { name: 'waits.settle', weight: 0, threads: 'any', plan: () => undefined };
      planned = { text: `settle all ${ctx.pending.length} pending waits (too many)`, run: () => settle(ctx) };
    }
    for (let attempt = 0; !planned && attempt < 32; attempt++) {
      op = ctx.random.weighted(mine);
      planned = op.plan(ctx);
    }
    if (!planned || !op) {
      beginStep(ctx, 'nothing applies; yield', verbose);
      await yieldToLoop();
      continue;
    }
    beginStep(ctx, `${op.name}: ${planned.text}`, verbose);
    ctx.tally.set(op.name, (ctx.tally.get(op.name) ?? 0) + 1);
    try {
      await planned.run();
    } catch (error) {
      if (error instanceof SoakFailure) throw error;
      throw new SoakFailure(`${op.name}: a valid call threw ${describeError(error)}${untypedStack(error) || (error instanceof Error && error.stack ? `\n${error.stack}` : '')}`);
    }
    if (ctx.failures.length > 0) throw new SoakFailure(ctx.failures[0]!);
    await yieldToLoop();
  }
}

/** Settles every pending wait and ends every object of the model (Model.teardownOrder), each as a step. */
export async function teardown(ctx: Context, verbose = false): Promise<void> {
  beginStep(ctx, `teardown: settle ${ctx.pending.length} pending waits`, verbose);
  await settle(ctx);
  for (const item of ctx.model.teardownOrder()) {
    if (!item.entry.alive) continue; // ended with an earlier item (a borrower with its lender, a lease with its pool)
    beginStep(ctx, `teardown: end ${item.entry.label}`, verbose);
    try {
      switch (item.what) {
        case 'lease':
          releaseLease(ctx, item.entry);
          break;
        case 'stream':
          destroyStream(ctx, item.entry);
          break;
        case 'buffer':
          item.entry.buffer.free();
          ctx.model.buffers.retire(item.entry);
          break;
        case 'pinned':
          item.entry.pinned.free();
          ctx.model.pinned.retire(item.entry);
          break;
        case 'event':
          item.entry.event.destroy();
          ctx.model.events.retire(item.entry);
          break;
        case 'module':
          item.entry.module.unload();
          ctx.model.modules.retire(item.entry);
          break;
        case 'pool':
          await endPool(ctx, item.entry, 'destroy');
          break;
        case 'graphBuffer':
          item.entry.buffer.free();
          ctx.model.graphBuffers.retire(item.entry);
          break;
        case 'graph':
          item.entry.graph.destroy();
          ctx.model.graphs.retire(item.entry);
          break;
        case 'graphExec':
          item.entry.exec.destroy();
          ctx.model.graphExecs.retire(item.entry);
          break;
        case 'managed':
          item.entry.managed.free();
          ctx.model.managed.retire(item.entry);
          break;
      }
    } catch (error) {
      if (error instanceof SoakFailure) throw error;
      throw new SoakFailure(`teardown of ${item.entry.label} threw ${describeError(error)}${error instanceof Error && error.stack ? `\n${error.stack}` : ''}`);
    }
  }
  if (ctx.pending.length > 0) await settle(ctx);
  if (ctx.failures.length > 0) throw new SoakFailure(ctx.failures[0]!);
}
