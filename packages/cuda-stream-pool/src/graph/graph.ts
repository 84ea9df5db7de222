// CUDA graphs: the work a stream capture recorded (Graph) and its executable form (GraphExec), which queues all of
// it with one driver call. See Note [graph ownership] below and Note [capture safety] in stream/capture.ts.
import { types } from 'node:util';

import { CU_STREAM_PER_THREAD, native, type NativeRef } from '../binding/binding.js';
import { adopt } from '../binding/native-ref-lifetime.js';
import { privateState, register, streams } from '../internal/handles.js';
import type { Device } from '../device/device.js';
import { DestroyedError, renameDestroyed } from '../binding/errors.js';
import type { CaptureRecord } from '../stream/capture.js';
import { DeviceBuffer } from '../memory/device-buffer.js';
import { ManagedBuffer } from '../memory/managed-buffer.js';
import { PinnedBuffer } from '../memory/pinned-buffer.js';
import { ArgumentPacker } from '../kernel/argument-packer.js';
import { Kernel, kernels } from '../kernel/kernel.js';
import { withStream } from '../stream/scope.js';
import { graphs, Stream, streamRef, streamHandle, type CaptureOptions } from '../stream/stream.js';
import { checkConstruction, guardReceivers, internalConstruction, invalidType, invalidValue, lockFields, validateFunction } from '../internal/validate.js';
import { isArrayBufferView, isDetached, viewBytes } from '../memory/host-views.js';

/* Note [graph ownership]: who keeps what alive.
 * - A Graph owns its CUgraph; a GraphExec owns its CUgraphExec and shares the CUgraph it was instantiated from, whose
 *   kernel nodes name the executable's nodes: graph.destroy() while executables live only retires the Graph object,
 *   and the driver graph goes with the last of them.
 * - Both hold every DeviceBuffer, ManagedBuffer, PinnedBuffer (or view of pinned memory) and Kernel that the captured
 *   work uses, and a GraphExec also what setKernelArguments gave it. So none of these is garbage-collected, and no
 *   finalizer frees memory the graph reads or writes, while a graph or an executable made from it lives; destroy()
 *   lets go.
 * - An explicit free() or unload() is still the owner's to make. A later launch of an executable whose work uses a
 *   freed buffer, freed pinned memory or an unloaded module throws DestroyedError instead of running on freed memory.
 *   Launches already queued are safe for device buffers: each stream a GraphExec is launched on is recorded as a use
 *   of its buffers (as `buffer.recordStream(stream)`), so their free waits for that stream; a ManagedBuffer's free
 *   waits for all of the device's work. Pinned memory knows no
 *   such uses: await the launch's stream before freeing a PinnedBuffer that a launched graph copies.
 * - When a GraphExec lets go (destroy, update), what it held stays referenced until the streams it was launched on
 *   have finished the work queued then, so a collected PinnedBuffer's memory is not recycled under a launch in
 *   flight. A stream that can no longer be awaited (destroyed, or a lease's wrapper after the lease ended) is not
 *   waited for: await such a stream's launches before destroying the executable.
 */

/** A kernel of any signature, as a graph launches it. @internal */
type CapturedKernel = Kernel<readonly unknown[]>;

/** A kernel launch recorded in a {@link Graph}: the handle {@link GraphExec.setKernelArguments} takes. */
export interface GraphKernelNode {
  /** The graph the launch was captured into. */
  readonly graph: Graph;
  /** Its position among the graph's kernel launches, in capture order (from 0). */
  readonly index: number;
  /** The kernel launched, whose signature types the arguments. */
  readonly kernel: Kernel<readonly unknown[]>;
}

interface GraphParts {
  ref: NativeRef;
  held: ReadonlySet<object>;
  nodes: readonly { kernel: CapturedKernel; node: bigint }[];
}

// A graph's parts, for its executables.
const graphParts = privateState<{ of(graph: Graph, method: string): GraphParts }>('Graph', ['of']);

/** Per device buffer, the streams a launch recorded as its uses; shared by the executables that use the buffer, since a
 * use, once recorded, lasts until the free. */
const launchUses = new WeakMap<DeviceBuffer, Set<bigint>>();

/** Records that a graph launch on `stream` uses `buffer` (as `buffer.recordStream(stream)`), once per stream. A
 * borrowed view's use on a per-thread stream is recorded right after the work, so every launch records it again. */
function recordLaunchUse(buffer: DeviceBuffer, stream: Stream): void {
  try {
    if (buffer.borrowed && streamHandle(stream) === CU_STREAM_PER_THREAD) return buffer.recordStream(stream);
    let streams = launchUses.get(buffer);
    if (streams === undefined) launchUses.set(buffer, (streams = new Set()));
    if (streams.has(stream.id)) return;
    buffer.recordStream(stream);
    streams.add(stream.id);
  } catch (error) {
    throw renameDestroyed(error, 'graphExec.launch'); // a destroyed stream or a freed buffer, found by recordStream
  }
}
// How a graph makes its executable.
const executables = privateState<{ make(ref: NativeRef, graph: Graph, parts: GraphParts): GraphExec }>('GraphExec', ['make']);

/** The kernel launches a capture recorded, typed again: stream/capture.ts sits below the kernel folder and holds each
 * kernel as an object, and only `kernel.launch()` notes a launch. */
function launchedKernels(record: CaptureRecord): { kernel: CapturedKernel; node: bigint }[] {
  return record.kernelNodes.map(({ kernel, node }) => {
    if (!(kernel instanceof Kernel)) throw new Error('cuda-stream-pool internal: a capture recorded a launch of something other than a Kernel');
    return { kernel, node };
  });
}

/** Throws DestroyedError when the module of a kernel the graph launches was unloaded: its work cannot run any more. */
function refuseUnloaded(parts: GraphParts, method: string): void {
  const unloaded = parts.nodes.find(({ kernel }) => kernel.module.unloaded);
  if (unloaded) throw new DestroyedError('Graph', method, `launches kernel "${unloaded.kernel.name}", whose module was unloaded`);
}

/** A CUDA graph: the work one stream capture recorded (copies, fills, kernel launches, across the streams forked
 * into it), ready to instantiate. Made by {@link Stream.endCapture} or {@link Graph.capture}.
 *
 * Lifetime: owned; `destroy()` or `using`; a finalizer destroys a forgotten one. It keeps alive the device buffers,
 * pinned memory and kernels its work uses (Note [graph ownership]); executables made from it keep the driver graph
 * and those objects alive after `destroy()`. After destroy every method throws {@link DestroyedError}.
 * Thread-safety: use it in the thread that captured it.
 *
 * @example
 * ```ts
 * await pool.run(async (stream) => {
 *   using graph = await Graph.capture(stream, () => {
 *     stream.copy(input, hostIn);
 *     kernel.launch({ grid, block, stream }, input, n);
 *     stream.copy(hostOut, input);
 *   });
 *   using exec = graph.instantiate();
 *   exec.launch(stream);
 *   await stream.synchronize();
 * });
 * ```
 */
export class Graph {
  #ref: NativeRef;
  #held: Set<object>;
  #nodes: readonly { kernel: CapturedKernel; node: bigint }[];
  #kernelNodes: readonly GraphKernelNode[];
  #destroyed = false;
  /** The device the graph's work runs on. */
  readonly device: Device;

  private constructor(token: symbol, ref: NativeRef, record: CaptureRecord, device: Device) {
    checkConstruction(token, 'Graph', 'stream.endCapture() or Graph.capture()');
    adopt(this, ref);
    this.#ref = ref;
    this.#held = record.held;
    const launches = launchedKernels(record);
    this.#nodes = launches;
    this.#kernelNodes = Object.freeze(launches.map(({ kernel }, index) => Object.freeze({ graph: this, index, kernel })));
    this.device = device;
    lockFields(this, ['device']);
    // The driver graph keeps its kernels' modules loaded: an unloaded module's functions would crash the driver.
    native.graphKeepModules(ref, [...new Set(launches.map(({ kernel }) => kernel))].map((kernel) => kernels.ref(kernel)));
  }

  static {
    guardReceivers(Graph, (value) => #ref in value);
    register(graphs, { fromCapture: (ref, record, device) => new Graph(internalConstruction, ref, record, device) });
    register(graphParts, { of: (graph, method) => ({ ref: graph.#use(method), held: graph.#held, nodes: graph.#nodes }) });
  }

  #use(method: string): NativeRef {
    if (this.#destroyed) throw new DestroyedError('Graph', method);
    return this.#ref;
  }

  /** Captures what `fn` queues on `stream` into a new graph: begins the capture (`stream.beginCapture(options)`),
   * runs `fn(stream)` with `stream` as {@link currentStream}, awaits it, and ends the capture, also when `fn` throws
   * or rejects: then the partial graph is destroyed and `fn`'s error is rethrown. Other tasks of this thread run
   * during `fn`'s awaits; in the default `'thread-local'` mode their potentially unsafe driver calls are refused, so
   * keep `fn` short and free of awaits where possible.
   * @throws rejects with `TypeError` ERR_INVALID_ARG_TYPE for a non-Stream or non-function; as
   * {@link Stream.beginCapture} and {@link Stream.endCapture}; with `fn`'s own error.
   * Wraps: cuStreamBeginCapture, cuStreamEndCapture. Lifetime: the caller owns the graph. */
  static async capture(stream: Stream, fn: (stream: Stream) => unknown, options?: CaptureOptions): Promise<Graph> {
    if (!streams.is(stream)) throw invalidType('stream', 'a Stream', stream);
    validateFunction(fn, 'fn');
    stream.beginCapture(options);
    try {
      await withStream(stream, fn);
    } catch (error) {
      try {
        stream.endCapture().destroy();
      } catch {
        // The capture is over either way (an invalidated one throws here); fn's error is the one to report.
      }
      throw error;
    }
    return stream.endCapture();
  }

  /** The number of nodes in the graph (copies, fills, kernels, and the empty nodes joins may add).
   * @throws {@link DestroyedError} after destroy. Wraps: cuGraphGetNodes. */
  get nodeCount(): number {
    return native.graphNodeCount(this.#use('nodeCount'));
  }

  /** The graph's kernel launches in capture order (across every stream of the capture), for
   * {@link GraphExec.setKernelArguments}. A new array each call; the nodes are the same objects.
   * @throws {@link DestroyedError} after destroy. */
  kernelNodes(): GraphKernelNode[] {
    this.#use('kernelNodes');
    return [...this.#kernelNodes];
  }

  /** Makes an executable graph, which {@link GraphExec.launch} queues on a stream as one driver call.
   * @throws {@link DestroyedError} after destroy, or when the module of a kernel it launches was unloaded;
   * {@link CudaError} when the driver cannot instantiate it. Wraps: cuGraphInstantiateWithFlags.
   * Lifetime: the caller owns the executable; it keeps this graph's driver graph and the objects its work uses alive
   * (Note [graph ownership]). */
  instantiate(): GraphExec {
    const parts = graphParts.of(this, 'instantiate');
    refuseUnloaded(parts, 'instantiate');
    return executables.make(native.graphInstantiate(parts.ref), this, parts);
  }

  /** True after `destroy()`. */
  get destroyed(): boolean {
    return this.#destroyed;
  }

  /** Destroys the graph (cuGraphDestroy) and lets go of what it kept alive; executables made from it keep working
   * and keep the driver graph until they are destroyed. Idempotent. */
  destroy(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.#held = new Set();
    native.graphDestroy(this.#ref);
  }

  /** Same as {@link Graph.destroy}. */
  [Symbol.dispose](): void {
    this.destroy();
  }
}

/** An executable graph: all of a {@link Graph}'s work, queued on a stream by one `launch(stream)`. Launches run in
 * stream order like any other work; await them with the stream's `synchronize()`.
 *
 * Lifetime: owned; `destroy()` or `using`; a finalizer destroys a forgotten one. Launches already queued still
 * complete after destroy. It keeps alive the driver graph it was made from and the objects its work uses
 * (Note [graph ownership]). After destroy every method throws {@link DestroyedError}.
 * Thread-safety: use it in the thread that made it; it may be launched on any stream of its device.
 */
export class GraphExec {
  #ref: NativeRef;
  #destroyed = false;
  #graphs: Set<Graph>; // the graphs whose kernel nodes name this executable's nodes
  // Per kernel launch: the kernel, the node naming ours (of the graph instantiated), and the same node in the graph
  // whose work runs now (differs after an in-place update).
  #nodes: { kernel: CapturedKernel; node: bigint; current: bigint }[];
  #held: ReadonlySet<object>;
  #arguments = new Map<number, DeviceBuffer[]>(); // buffers given by setKernelArguments, per node index
  #packers = new Map<CapturedKernel, ArgumentPacker>();
  #checks: object[] = []; // #held and #arguments, flattened for the launch check
  #recordedOn = new Set<bigint>(); // ids of streams recorded as uses of the buffers in #checks
  #borrowed: DeviceBuffer[] = []; // borrowed views in #checks, recorded on every launch on a per-thread stream
  #launchedOn = new Map<bigint, Stream>(); // streams launched on since what #checks holds was last let go
  #lastStream: Stream | undefined; // the last launch's stream, while #launchedOn holds it and its id is in #recordedOn
  /** The device the graph's work runs on. */
  readonly device: Device;

  private constructor(token: symbol, ref: NativeRef, graph: Graph, parts: GraphParts) {
    checkConstruction(token, 'GraphExec', 'graph.instantiate()');
    adopt(this, ref);
    this.#ref = ref;
    this.device = graph.device;
    lockFields(this, ['device']);
    this.#graphs = new Set([graph]);
    this.#nodes = parts.nodes.map(({ kernel, node }) => ({ kernel, node, current: node }));
    this.#held = new Set(parts.held);
    this.#refresh();
  }

  static {
    register(executables, { make: (ref, graph, parts) => new GraphExec(internalConstruction, ref, graph, parts) });
    guardReceivers(GraphExec, (value) => #ref in value);
  }

  #use(method: string): NativeRef {
    if (this.#destroyed) throw new DestroyedError('GraphExec', method);
    return this.#ref;
  }

  #refresh(): void {
    this.#checks = [...this.#held];
    for (const buffers of this.#arguments.values()) this.#checks.push(...buffers);
    this.#recordedOn.clear();
    this.#lastStream = undefined;
    this.#borrowed = this.#checks.filter((object): object is DeviceBuffer => object instanceof DeviceBuffer && object.borrowed);
  }

  /** Keeps what the work used so far referenced until every stream launched on has finished the work queued on it
   * now: launches in flight may still copy through pinned memory among it, which no fence protects from reuse once
   * its PinnedBuffer is collected (device buffers need no such care: their free waits for the launch streams). */
  #letGoLater(): void {
    const held = this.#checks;
    const streams = [...this.#launchedOn.values()];
    this.#launchedOn.clear();
    this.#lastStream = undefined;
    if (streams.length === 0 || !held.some((object) => object instanceof PinnedBuffer || isArrayBufferView(object) || types.isArrayBuffer(object))) return;
    // A stream that cannot be awaited any more (destroyed, a lease's wrapper after release) rejects at once: launches
    // on it get no such delay (see Note [graph ownership]).
    void Promise.allSettled(streams.map((stream) => stream.synchronize())).then(() => held.length);
  }

  /** Throws DestroyedError when the work uses a freed buffer, freed pinned memory or an unloaded module. */
  #checkAlive(): void {
    for (const object of this.#checks) {
      let gone: string | undefined;
      if (object instanceof DeviceBuffer) gone = object.freed ? 'a DeviceBuffer it uses was freed' : undefined;
      else if (object instanceof PinnedBuffer) gone = object.freed ? 'a PinnedBuffer it copies was freed' : undefined;
      else if (object instanceof ManagedBuffer) gone = object.freed ? 'a ManagedBuffer it uses was freed' : undefined;
      else if (object instanceof Kernel) gone = object.module.unloaded ? `the module of kernel "${object.name}" was unloaded` : undefined;
      else if (isArrayBufferView(object) || types.isArrayBuffer(object)) gone = isDetached(isArrayBufferView(object) ? viewBytes(object).buffer : object) ? 'pinned memory it copies was freed' : undefined;
      if (gone !== undefined) throw new DestroyedError('GraphExec', 'launch', `cannot run: ${gone}`);
    }
  }

  /** Queues one run of the whole graph on `stream` and returns at once; await it with `stream.synchronize()`.
   * Launches of one executable run one after another, also on different streams. The first launch on a stream
   * records that stream as a use of the graph's device buffers, so they are not freed before it is done.
   * @throws `TypeError` ERR_INVALID_ARG_TYPE for a non-Stream, ERR_INVALID_ARG_VALUE for a stream of another device;
   * {@link DestroyedError} after destroy, for a destroyed stream, or when a buffer, pinned memory or module the work
   * uses was freed or unloaded; {@link CudaError} when the driver refuses (with deferred submission the launch is
   * recorded, and a refusal rejects the stream's next wait instead). Wraps: cuGraphLaunch. */
  launch(stream: Stream): void {
    if (!streams.is(stream)) throw invalidType('stream', 'a Stream', stream);
    const ref = this.#use('launch');
    if (streams.device(stream) !== this.device)
      throw invalidValue('stream', `is on device ${stream.device.ordinal}, but the graph runs on device ${this.device.ordinal}.`);
    const target = streamRef(stream, 'graphExec.launch');
    this.#checkAlive();
    // The stream of the last launch needs no look-up by id: its id is in #recordedOn and #launchedOn until they are
    // cleared, which forgets it too.
    let recordedAll = false;
    if (stream !== this.#lastStream) {
      const id = stream.id;
      if (!this.#recordedOn.has(id)) {
        for (const object of this.#checks) if (object instanceof DeviceBuffer) recordLaunchUse(object, stream);
        this.#recordedOn.add(id);
        recordedAll = true;
      }
      const launched = this.#launchedOn.get(id);
      if (launched === undefined) this.#launchedOn.set(id, stream);
      // Only the object #launchedOn holds (another view of the same stream, a lease's, may be there), so that
      // remembering it keeps nothing alive longer.
      this.#lastStream = launched === undefined || launched === stream ? stream : undefined;
    }
    if (!recordedAll && streamHandle(stream) === CU_STREAM_PER_THREAD) for (const buffer of this.#borrowed) recordLaunchUse(buffer, stream);
    native.graphExecLaunch(ref, target);
  }

  /** Makes later launches run `graph`'s work instead: in place when the driver can (same topology and node types;
   * kernel arguments, copy addresses and sizes may differ), which is cheap and returns true; otherwise this
   * executable is instantiated anew from `graph` and it returns false. Launches already queued are not affected.
   * Afterwards the kernel nodes of `graph` (and, after an in-place update, still those of the graphs before it) name
   * this executable's nodes, and arguments given by `setKernelArguments` are replaced by `graph`'s.
   * @throws `TypeError` ERR_INVALID_ARG_TYPE for a non-Graph, ERR_INVALID_ARG_VALUE for a graph of another device;
   * {@link DestroyedError} after destroy, for a destroyed graph, or when the module of a kernel `graph` launches was
   * unloaded; {@link CudaError} when the driver refuses.
   * Wraps: cuGraphExecUpdate, and cuGraphInstantiateWithFlags + cuGraphExecDestroy for the fallback. */
  update(graph: Graph): boolean {
    if (!(graph instanceof Graph)) throw invalidType('graph', 'a Graph', graph);
    const ref = this.#use('update');
    if (graph.device !== this.device)
      throw invalidValue('graph', `is on device ${graph.device.ordinal}, but this GraphExec runs on device ${this.device.ordinal}.`);
    const parts = graphParts.of(graph, 'update');
    refuseUnloaded(parts, 'update');
    const inPlace = native.graphExecUpdate(ref, parts.ref);
    if (inPlace) {
      // The nodes of the graph instantiated first still name ours; the kernels are the new graph's.
      // The driver pairs nodes in the order they were captured, as kernelNodes() lists them.
      this.#nodes = this.#nodes.map((entry, i) => {
        const next = parts.nodes[i];
        return next === undefined ? entry : { kernel: next.kernel, node: entry.node, current: next.node };
      });
      this.#graphs.add(graph);
    } else {
      this.#nodes = parts.nodes.map(({ kernel, node }) => ({ kernel, node, current: node }));
      this.#graphs = new Set([graph]);
    }
    this.#letGoLater();
    this.#held = new Set(parts.held);
    this.#arguments.clear();
    this.#refresh();
    return inPlace;
  }

  /** Gives the kernel launch `node` new arguments for later launches; its grid, block and shared memory stay as
   * captured, and launches already queued keep their arguments. The arguments are checked against the kernel's
   * signature as in `kernel.launch` (a `'ptr'` takes a DeviceBuffer of this device or a bigint address); the
   * executable keeps the DeviceBuffers alive until they are replaced or it is destroyed.
   * @param node - from `graph.kernelNodes()` of the graph this executable was instantiated from or updated with.
   * @throws `TypeError` ERR_INVALID_ARG_VALUE for a node of another graph, a wrong argument count or a buffer of
   * another device; `TypeError` ERR_INVALID_ARG_TYPE or `RangeError` ERR_OUT_OF_RANGE naming `"args[i]"`;
   * {@link DestroyedError} after destroy or for a freed buffer; {@link CudaError} when the driver refuses.
   * Wraps: cuGraphKernelNodeGetParams, cuGraphExecKernelNodeSetParams. */
  setKernelArguments(node: GraphKernelNode, ...args: unknown[]): void {
    const ref = this.#use('setKernelArguments');
    if (typeof node !== 'object' || node === null || !(node.graph instanceof Graph))
      throw invalidType('node', 'a GraphKernelNode from graph.kernelNodes()', node);
    const entry = this.#nodes[node.index];
    if (!this.#graphs.has(node.graph) || entry === undefined || entry.kernel !== node.kernel)
      throw invalidValue('node', 'is not a kernel node of the graph this GraphExec was instantiated from or last updated with; take it from that graph\'s kernelNodes().');
    if (entry.node === 0n || entry.current === 0n)
      throw invalidValue('node', `names no kernel node: the driver did not report one after launch ${node.index} was captured (it needs cuStreamGetCaptureInfo at the CUDA 12.0 ABI).`);
    const kernel = entry.kernel;
    const buffers: DeviceBuffer[] = [];
    const values = args.map((value, i) => {
      if (!(value instanceof DeviceBuffer) || kernel.signature[i] !== 'ptr') return value;
      if (value.freed) throw new DestroyedError('DeviceBuffer', 'graphExec.setKernelArguments', 'was freed');
      if (value.device !== this.device)
        throw invalidValue(`args[${i}]`, `is a DeviceBuffer on device ${value.device.ordinal}, but the graph runs on device ${this.device.ordinal}.`);
      buffers.push(value);
      return value.ptr;
    });
    let packer = this.#packers.get(kernel);
    if (packer === undefined) {
      packer = new ArgumentPacker(kernel.signature, kernel.name);
      this.#packers.set(kernel, packer);
    }
    packer.pack(values);
    native.graphExecSetKernelParams(ref, entry.node, entry.current, packer.bytes);
    this.#arguments.set(node.index, buffers);
    this.#refresh();
  }

  /** True after `destroy()`. */
  get destroyed(): boolean {
    return this.#destroyed;
  }

  /** Destroys the executable graph (cuGraphExecDestroy; launches already queued still complete) and lets go of what
   * it kept alive. Idempotent. */
  destroy(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.#letGoLater();
    this.#held = new Set();
    this.#arguments.clear();
    this.#checks = [];
    native.graphExecDestroy(this.#ref);
  }

  /** Same as {@link GraphExec.destroy}. */
  [Symbol.dispose](): void {
    this.destroy();
  }
}
