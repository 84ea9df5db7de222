// Soak operations on CUDA graphs, kept across steps in the model: captures (Graph.capture, and beginCapture/
// endCapture by hand), instantiation, launches checked by reading the written words back, in-place and
// re-instantiating updates, new kernel arguments, inspection, destroy, frees of a graph's buffer (launches are then
// refused), executables dropped for their finalizer, and invalid calls.
import { DeviceBuffer, Graph, Stream } from 'cuda-stream-pool';

import { SoakFailure, type ErrorKind } from '../check.js';
import type { Context } from '../context.js';
import type { FillWork, GraphEntry, GraphExecEntry } from '../model.js';
import { kernels, pickInvalid, workStream, type InvalidCase, type Operation } from '../operation.js';

/** Reads the first `work.words` u32 of `work.buffer` back on `stream` and checks each is `work.value`. */
async function expectFilled(ctx: Context, stream: Stream, work: FillWork, what: string): Promise<void> {
  const out = new Uint32Array(work.words);
  stream.copy(out, work.buffer, { byteLength: 4 * work.words });
  await ctx.within(stream.synchronize(), `${what}: synchronize()`);
  const at = out.findIndex((v) => v !== work.value);
  if (at >= 0) throw new SoakFailure(`${what}: word ${at} of ${work.words} is ${out[at]}, expected ${work.value}`);
  ctx.roundTrips++;
}

/** Why a launch of `entry` must be refused with DestroyedError now, or undefined when it must run. */
function launchRefusal(entry: GraphExecEntry): string | undefined {
  if (entry.latest.work.buffer.freed || entry.work.buffer.freed) return 'a buffer it writes was freed';
  if (!entry.latest.work.module.alive) return 'its kernels\' module was unloaded';
  return undefined;
}

/** Frees `buffer`, a live graph buffer (else nothing happens), once no live graph or executable writes it. */
function freeIfUnused(ctx: Context, buffer: DeviceBuffer): void {
  const entry = ctx.model.graphBuffers.alive.find((b) => b.buffer === buffer);
  const used = (work: FillWork) => work.buffer === buffer;
  if (!entry || ctx.model.graphs.alive.some((g) => used(g.work)) || ctx.model.graphExecs.alive.some((e) => used(e.work) || used(e.latest.work))) return;
  buffer.free();
  ctx.model.graphBuffers.retire(entry);
}

function addGraph(ctx: Context, graph: Graph, work: FillWork, shape: GraphEntry['shape']): GraphEntry {
  const serial = ctx.model.serial();
  return ctx.model.graphs.add({ serial, label: `graph#${serial}(${shape}, ${work.words} words = ${work.value})`, alive: true, graph, work, shape });
}

export const graphOperations: Operation[] = [
  {
    name: 'graph.capture',
    weight: 1.5,
    threads: 'any',
    plan(ctx) {
      const module = kernels(ctx);
      if (!module || ctx.model.graphs.full || ctx.model.graphBuffers.full) return undefined;
      const words = ctx.random.size(16 * 1024);
      const value = ctx.random.int(0, 2 ** 32 - 1);
      const shape = ctx.random.pick(['fill', 'fill+empty'] as const);
      const byHand = ctx.random.chance(0.4);
      return {
        text: `${byHand ? 'beginCapture()/endCapture()' : 'Graph.capture()'} on a new non-blocking stream: ${module.label} ${shape}, fill_u32 ${value} into ${words} words`,
        async run() {
          // Non-blocking and relaxed: other threads' legacy-stream work and this thread's pending steps would
          // otherwise invalidate the capture (CUDA's implicit synchronization, thread-local capture rules).
          const stream = Stream.create({ nonBlocking: true });
          try {
            const buffer = DeviceBuffer.alloc(4 * words, { stream });
            const serial = ctx.model.serial();
            ctx.model.graphBuffers.add({ serial, label: `buffer#${serial}(${4 * words} B, graph)`, alive: true, buffer, view: false });
            // Launches run on other streams, which must not touch the memory before its allocation is done.
            await ctx.within(stream.synchronize(), 'the graph buffer\'s allocation');
            const record = (on: Stream) => {
              module.fill.launch({ grid: Math.ceil(words / 256), block: 256, stream: on }, buffer, value, words);
              if (shape === 'fill+empty') module.empty.launch({ grid: 1, block: 1, stream: on });
            };
            let graph: Graph;
            if (byHand) {
              stream.beginCapture({ mode: 'relaxed' });
              if (!stream.capturing) throw new SoakFailure('stream.capturing is false after beginCapture()');
              record(stream);
              graph = stream.endCapture();
              if (stream.capturing) throw new SoakFailure('stream.capturing is true after endCapture()');
            } else {
              graph = await ctx.within(Graph.capture(stream, record, { mode: 'relaxed' }), 'Graph.capture()');
            }
            const nodes = graph.kernelNodes();
            const expected = shape === 'fill' ? 1 : 2;
            if (graph.nodeCount !== expected || nodes.length !== expected || nodes[0]!.kernel !== module.fill || nodes[0]!.index !== 0)
              throw new SoakFailure(`the captured graph has ${graph.nodeCount} nodes and ${nodes.length} kernel nodes (the first ${nodes[0]?.kernel.name}); expected ${expected}, fill_u32 first`);
            addGraph(ctx, graph, { buffer, value, words, module }, shape);
          } finally {
            stream.destroy();
          }
        },
      };
    },
  },
  {
    name: 'graph.instantiate',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      const graph = ctx.model.graphs.pick(ctx.random);
      if (!graph || ctx.model.graphExecs.full) return undefined;
      return {
        text: `${graph.label}.instantiate()${graph.work.module.alive ? '' : ' (its module was unloaded: refused)'}`,
        run() {
          if (!graph.work.module.alive) return ctx.invalid(`${graph.label}.instantiate() after its module was unloaded`, ['destroyed'], () => graph.graph.instantiate());
          const exec = graph.graph.instantiate();
          const serial = ctx.model.serial();
          ctx.model.graphExecs.add({ serial, label: `graphExec#${serial}(of ${graph.label})`, alive: true, exec, latest: graph, work: graph.work });
        },
      };
    },
  },
  {
    name: 'graphExec.launch',
    weight: 3,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.graphExecs.pick(ctx.random);
      const stream = workStream(ctx);
      if (!entry || !stream) return undefined;
      const launches = ctx.random.int(1, 3);
      return {
        text: `${entry.label}.launch(${stream.label}) x${launches}, read the words back`,
        async run() {
          const refusal = launchRefusal(entry);
          if (refusal) return ctx.invalid(`${entry.label}.launch() (${refusal})`, ['destroyed'], () => entry.exec.launch(stream.stream));
          for (let i = 0; i < launches; i++) entry.exec.launch(stream.stream);
          await expectFilled(ctx, stream.stream, entry.work, `${entry.label} launched on ${stream.label}`);
        },
      };
    },
  },
  {
    name: 'graphExec.update',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.graphExecs.pick(ctx.random);
      const graph = ctx.model.graphs.pick(ctx.random);
      if (!entry || !graph) return undefined;
      return {
        text: `${entry.label}.update(${graph.label}) (from ${entry.latest.shape} to ${graph.shape})${graph.work.module.alive ? '' : ' (its module was unloaded: refused)'}`,
        run() {
          if (!graph.work.module.alive) return ctx.invalid(`${entry.label}.update(${graph.label}) after its module was unloaded`, ['destroyed'], () => entry.exec.update(graph.graph));
          const inPlace = entry.exec.update(graph.graph);
          if (inPlace !== (graph.shape === entry.latest.shape))
            throw new SoakFailure(`update() from ${entry.latest.shape} to ${graph.shape} returned ${inPlace}: ${inPlace ? 'in place across topologies' : 'instantiated anew for the same topology'}`);
          entry.latest = graph;
          entry.work = graph.work;
        },
      };
    },
  },
  {
    name: 'graphExec.setKernelArguments',
    weight: 1.5,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.graphExecs.pick(ctx.random, (e) => e.latest.alive && e.latest.work.module.alive);
      if (!entry) return undefined;
      const target = ctx.random.chance(0.7) ? undefined : ctx.model.graphBuffers.pick(ctx.random);
      const buffer = target?.buffer ?? entry.work.buffer;
      // The captured grid covers the latest graph's words; the buffer must hold the words too.
      const limit = Math.min(entry.latest.work.words, Math.floor(buffer.byteLength / 4));
      const words = ctx.random.int(1, limit);
      const value = ctx.random.int(0, 2 ** 32 - 1);
      const invalid = ctx.random.chance(0.25) ? ctx.random.pick(['count', 'range', 'node'] as const) : undefined;
      return {
        text: `${entry.label}.setKernelArguments(fill node of ${entry.latest.label}, ${target ? target.label : 'its buffer'}, ${value}, ${words})${invalid ? ` made invalid: ${invalid}` : ''}`,
        run() {
          const node = entry.latest.graph.kernelNodes()[0]!;
          // A freed buffer among the arguments is found before their count and ranges.
          const or = (kind: ErrorKind): ErrorKind[] => (buffer.freed ? [kind, 'destroyed'] : [kind]);
          if (invalid === 'count') return ctx.invalid('setKernelArguments() with 2 of 3 arguments', or('value'), () => entry.exec.setKernelArguments(node, buffer, value));
          if (invalid === 'range') return ctx.invalid('setKernelArguments() with -1 for a u32', or('range'), () => entry.exec.setKernelArguments(node, buffer, -1, words));
          if (invalid === 'node') return ctx.invalid('setKernelArguments({})', ['type'], () => entry.exec.setKernelArguments({} as never, buffer, value, words));
          if (buffer.freed) return ctx.invalid('setKernelArguments() with a freed buffer', ['destroyed'], () => entry.exec.setKernelArguments(node, buffer, value, words));
          entry.exec.setKernelArguments(node, buffer, value, words);
          entry.work = { buffer, value, words, module: entry.latest.work.module };
        },
      };
    },
  },
  {
    name: 'graph.inspect',
    weight: 0.7,
    threads: 'any',
    plan(ctx) {
      const dead = ctx.random.chance(0.4);
      const graph = dead ? ctx.model.graphs.pickDead(ctx.random) : ctx.model.graphs.pick(ctx.random);
      if (!graph) return undefined;
      if (dead) {
        const method = ctx.random.pick(['nodeCount', 'kernelNodes', 'instantiate'] as const);
        const call = { nodeCount: () => graph.graph.nodeCount, kernelNodes: () => graph.graph.kernelNodes(), instantiate: () => graph.graph.instantiate() }[method];
        return { text: `${graph.label}.${method} after destroy`, run: () => ctx.invalid(`${graph.label}.${method} after destroy`, ['destroyed'], call) };
      }
      return {
        text: `${graph.label}: nodeCount, kernelNodes(), destroyed`,
        run() {
          const nodes = graph.graph.kernelNodes();
          if (graph.graph.destroyed || graph.graph.nodeCount !== nodes.length || nodes.some((n, i) => n.index !== i || n.graph !== graph.graph))
            throw new SoakFailure(`${graph.label}: destroyed ${graph.graph.destroyed}, nodeCount ${graph.graph.nodeCount}, kernel nodes ${nodes.map((n) => `${n.index}:${n.kernel.name}`).join(' ')}`);
        },
      };
    },
  },
  {
    name: 'graph.destroy',
    weight: 0.6,
    threads: 'any',
    plan(ctx) {
      const graph = ctx.model.graphs.pick(ctx.random);
      if (!graph) return undefined;
      return {
        text: `${graph.label}.destroy() (its executables keep working)`,
        run() {
          graph.graph.destroy();
          if (!graph.graph.destroyed) throw new SoakFailure(`${graph.label}.destroyed is false after destroy()`);
          ctx.model.graphs.retire(graph);
          freeIfUnused(ctx, graph.work.buffer);
        },
      };
    },
  },
  {
    name: 'graph.freeBuffer',
    weight: 0.3,
    threads: 'any',
    plan(ctx) {
      const buffer = ctx.model.graphBuffers.pick(ctx.random);
      if (!buffer) return undefined;
      return {
        text: `free ${buffer.label}, which graphs may still write (their launches are refused from now on)`,
        run() {
          buffer.buffer.free();
          ctx.model.graphBuffers.retire(buffer);
        },
      };
    },
  },
  {
    name: 'graphExec.end',
    weight: 0.6,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.graphExecs.pick(ctx.random);
      const stream = workStream(ctx);
      if (!entry) return undefined;
      // Dropped: a launch may still be queued when the finalizer destroys the executable.
      const drop = ctx.random.chance(0.3) && stream !== undefined && launchRefusal(entry) === undefined;
      return {
        text: drop ? `${entry.label}.launch(${stream!.label}), then drop it (its finalizer destroys it) and gc` : `${entry.label}.destroy(), then launch (refused)`,
        run() {
          if (drop) {
            entry.exec.launch(stream!.stream);
            ctx.model.graphExecs.drop(entry);
            ctx.gc();
          } else {
            entry.exec.destroy();
            ctx.model.graphExecs.retire(entry);
            ctx.invalid(`${entry.label}.launch() after destroy`, ['destroyed'], () => entry.exec.launch(stream?.stream ?? Stream.perThread()));
          }
          freeIfUnused(ctx, entry.work.buffer);
          freeIfUnused(ctx, entry.latest.work.buffer);
        },
      };
    },
  },
  {
    name: 'graph.invalid',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      const exec = ctx.model.graphExecs.pick(ctx.random);
      const stream = workStream(ctx, (s) => s.kind === 'owned');
      const cases: InvalidCase[] = [
        ['Graph.capture(42, fn)', ['type'], () => Graph.capture(42 as never, () => undefined)],
        ['Graph.capture(stream, 42)', ['type'], () => Graph.capture(Stream.perThread(), 42 as never)],
        ['Stream.legacy().beginCapture()', ['capture'], () => Stream.legacy().beginCapture()],
      ];
      if (exec) {
        cases.push([`${exec.label}.launch(42)`, ['type'], () => exec.exec.launch(42 as never)]);
        cases.push([`${exec.label}.update(42)`, ['type'], () => exec.exec.update(42 as never)]);
      }
      if (stream) {
        cases.push([`${stream.label}.endCapture() without a capture`, ['capture'], () => stream.stream.endCapture()]);
        cases.push([`${stream.label}.beginCapture({ mode: 'loose' })`, ['value'], () => stream.stream.beginCapture({ mode: 'loose' as never })]);
      }
      return pickInvalid(ctx, cases, 'either');
    },
  },
];
