// Graphs: a capture of a copy in, a kernel and a copy out (the kernel's node found through the capture's info), a
// fork and join across two streams in one capture, instantiation, launches, new kernel arguments, an update in place
// and one that instantiates anew, and a capture's status asked while it is open.
import { readFileSync } from 'node:fs';

import { DeviceBuffer, Graph, Module, PinnedBuffer, Stream, type GraphExec } from 'cuda-stream-pool';

import { cleanUp, expectAll, WrongResult, type Workload } from '../workload.js';

// Not through test/support/gpu.js, which asks the driver for a device when imported: calls the sweep would count.
const ptx = readFileSync(new URL('../../../../../test/kernels/test-kernels.ptx', import.meta.url), 'utf8');

const N = 1024; // u32 elements per buffer

export const workload: Workload = {
  name: 'graphs',
  async run() {
    const module = await Module.load(ptx);
    const owned: { destroy(): void }[] = [];
    const buffers: DeviceBuffer[] = [];
    const pinned: PinnedBuffer[] = [];
    await cleanUp(
      async () => {
        const fill = module.getFunction('fill_u32', ['ptr', 'u32', 'u32']);
        const main = Stream.create();
        owned.push(main);
        const side = Stream.create();
        owned.push(side);
        const left = DeviceBuffer.alloc(N * 4, { stream: main });
        buffers.push(left);
        const right = DeviceBuffer.alloc(N * 4, { stream: main });
        buffers.push(right);
        const input = PinnedBuffer.alloc(N * 4);
        pinned.push(input);
        const output = PinnedBuffer.alloc(2 * N * 4);
        pinned.push(output);
        input.view(Uint32Array).fill(3);
        await main.synchronize();

        // Copy in, kernel, copy out, replayed twice.
        const task = await Graph.capture(main, (s) => {
          s.copy(left, input);
          fill.launch({ grid: N / 256, block: 256, stream: s }, left, 7, N / 2);
          s.copy(output, left, { byteLength: N * 4 });
        });
        owned.push(task);
        if (task.nodeCount !== 3 || task.kernelNodes().length !== 1) throw new WrongResult(`the task graph has ${task.nodeCount} nodes`);
        const exec: GraphExec = task.instantiate();
        owned.push(exec);
        exec.launch(main);
        exec.launch(main);
        await main.synchronize();
        const first = output.view(Uint32Array).subarray(0, N);
        expectAll('the kernel\'s half', first.subarray(0, N / 2), 7);
        expectAll('the copied half', first.subarray(N / 2), 3);

        // New arguments for the kernel node, then an update in place from a graph of the same shape.
        exec.setKernelArguments(task.kernelNodes()[0]!, left, 9, N);
        exec.launch(main);
        await main.synchronize();
        expectAll('after new arguments', output.view(Uint32Array).subarray(0, N), 9);
        const same = await Graph.capture(main, (s) => {
          s.copy(left, input);
          fill.launch({ grid: N / 256, block: 256, stream: s }, left, 11, N);
          s.copy(output, left, { byteLength: N * 4 });
        });
        owned.push(same);
        if (!exec.update(same)) throw new WrongResult('a graph of the same shape was not applied in place');
        exec.launch(main);
        await main.synchronize();
        expectAll('after the update', output.view(Uint32Array).subarray(0, N), 11);

        // A fork and join in one capture, begun and ended by hand; then an update to its other shape.
        main.beginCapture();
        side.waitStream(main);
        if (!side.capturing) throw new WrongResult('the forked stream is not capturing');
        fill.launch({ grid: N / 256, block: 256, stream: main }, left, 21, N);
        fill.launch({ grid: N / 256, block: 256, stream: side }, right, 22, N);
        main.waitStream(side);
        main.copy(output, left, { byteLength: N * 4 });
        main.copy(output, right, { byteLength: N * 4, dstOffset: N * 4 });
        const forked = main.endCapture();
        owned.push(forked);
        if (exec.update(forked)) throw new WrongResult('a graph of another shape was applied in place');
        exec.launch(main);
        await main.synchronize();
        expectAll('the main branch', output.view(Uint32Array).subarray(0, N), 21);
        expectAll('the side branch', output.view(Uint32Array).subarray(N), 22);
      },
      () => {
        for (const buffer of buffers) buffer.free();
      },
      () => {
        for (const block of pinned) block.free();
      },
      () => {
        for (const thing of owned.reverse()) thing.destroy();
      },
      () => module.unload(),
    );
  },
};
