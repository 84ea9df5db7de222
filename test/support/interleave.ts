// Calls on two devices, interleaved, checking after each one that its device's primary context is current on the
// calling thread and that every result is right: run at once by the main thread and workers of the multi-device suite.
import { readFileSync } from 'node:fs';
import path from 'node:path';

import { DeviceBuffer, Module, Stream } from 'cuda-stream-pool';
import { native } from '#library/binding/binding.js';
import { repositoryRoot, testKernels } from './gpu.js';

/** Runs `rounds` rounds alternating between devices 0 and 1 (starting with `seed % 2`); resolves with what went
 * wrong, empty when nothing did. Each round: a kernel and an upload on one device, a cross-device wait and a peer
 * copy on the other, a download, two frees; the current device is checked after every call. */
export async function interleave(seed: number, rounds: number): Promise<string[]> {
  const failures: string[] = [];
  const streams = [Stream.create({ device: 0 }), Stream.create({ device: 1 })];
  const kernels = [(await testKernels(0)).fillU32, (await testKernels(1)).fillU32];
  const expectCurrent = (device: number, after: string, round: number) => {
    const current = native.currentDevice();
    if (current !== device) failures.push(`round ${round}: after ${after} the current device is ${current}, not ${device}`);
  };
  const n = 4096;
  const ptx = readFileSync(path.join(repositoryRoot, 'test', 'kernels', 'test-kernels.ptx'), 'utf8');
  for (let round = 0; round < rounds; round++) {
    const d = (seed + round) % 2;
    const o = 1 - d;
    const value = (seed * 1000 + round) >>> 0;
    if (round % 10 === 0) {
      // A module loaded on a libuv pool thread, which makes device d's context current there, then used here.
      const module = await Module.load(ptx, { device: d });
      const fill = module.getFunction('fill_u32', ['ptr', 'u32', 'u32']);
      const out = DeviceBuffer.alloc(4 * n, { stream: streams[d]! });
      fill.launch({ grid: Math.ceil(n / 256), block: 256, stream: streams[d]! }, out, value + 7, n);
      expectCurrent(d, 'a launch of a module loaded on a libuv thread', round);
      const got = await out.toArray(Uint32Array, { stream: streams[d]! });
      if (got.some((v) => v !== value + 7)) failures.push(`round ${round}: the kernel of a module loaded for device ${d} wrote wrong values`);
      out.free();
      module.unload();
    }
    const upload = Uint32Array.from({ length: n }, (_, i) => value + i);
    const onD = DeviceBuffer.from(upload, { stream: streams[d]! });
    expectCurrent(d, 'DeviceBuffer.from', round);
    const filled = DeviceBuffer.alloc(4 * n, { stream: streams[d]! });
    kernels[d]!.launch({ grid: Math.ceil(n / 256), block: 256, stream: streams[d]! }, filled, value, n);
    expectCurrent(d, 'a launch', round);
    const onO = DeviceBuffer.alloc(4 * n, { stream: streams[o]! });
    expectCurrent(o, 'DeviceBuffer.alloc', round);
    const written = streams[d]!.recordEvent();
    expectCurrent(d, 'recordEvent', round);
    streams[o]!.waitEvent(written);
    expectCurrent(o, 'waitEvent with an event of the other device', round);
    streams[o]!.copy(onO, onD);
    expectCurrent(o, 'a copy from the other device', round);
    const filledOnO = DeviceBuffer.alloc(4 * n, { stream: streams[o]! });
    streams[d]!.waitStream(streams[o]!); // the allocation on the other device comes first
    expectCurrent(d, 'waitStream on a stream of the other device', round);
    streams[d]!.copy(filledOnO, filled); // ordered on the source's stream this time
    expectCurrent(d, 'a copy to the other device', round);
    streams[o]!.waitStream(streams[d]!);
    const [copied, fill] = await Promise.all([onO.toArray(Uint32Array, { stream: streams[o]! }), filledOnO.toArray(Uint32Array, { stream: streams[o]! })]);
    expectCurrent(o, 'toArray', round);
    if (copied.some((v, i) => v !== value + i)) failures.push(`round ${round}: the copy from device ${d} to ${o} has wrong bytes`);
    if (fill.some((v) => v !== value)) failures.push(`round ${round}: the kernel's output copied from device ${d} to ${o} is wrong`);
    onD.free();
    expectCurrent(d, 'a free after a use on the other device', round);
    filled.free();
    onO.free();
    expectCurrent(o, 'a free', round);
    filledOnO.free();
    written.destroy();
  }
  await Promise.all(streams.map((stream) => stream.synchronize()));
  for (const stream of streams) stream.destroy();
  return failures;
}
