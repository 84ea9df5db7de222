// Where the library's cost above the driver goes, for the calls whose `bench micro` ratio misses its target: for
// DeviceBuffer.alloc() + free() and Stream.create() + destroy(), in one process, the C++ loop of the benchmark's addon
// (the driver calls alone), the bare native calls of the library (no JS wrapper, no validation), and the public call.
// public - native is the JS layer's share; native - C++ the native layer's, including any driver calls it adds (count
// them with the simulated driver's SIMULATED_DRIVER_COUNTS; scripts/driver-call-cost.cc times them on a GPU).
// Medians of 15 runs of 2,000 pairs each, after a warm-up, in ns per pair. Built code from dist/ (npm run build):
//   node scripts/call-gap.mjs                                                        (on a GPU)
//   CUDA_STREAM_POOL_LIBCUDA=/tmp/null-driver/libcuda.so.1 node scripts/call-gap.mjs  (the library's own cost alone)
import { DeviceBuffer, Stream } from 'cuda-stream-pool';
import { native } from '#library/binding/binding.js';
import { streamRef } from '#library/stream/stream.js';
import { benchAddon } from '#bench/bench-addon.js';

const PAIRS = 2000;
const RUNS = 15;
const BYTES = 1 << 20;
const addon = benchAddon();

const median = (values) => values.sort((a, b) => a - b)[values.length >> 1];

/** ns per pair of a JS loop `run(pairs)`, with `between()` after each run (untimed). */
function timeLoop(run, between = () => {}) {
  for (let warm = 0; warm < 5; warm++) {
    run(PAIRS);
    between();
  }
  const perPair = [];
  for (let r = 0; r < RUNS; r++) {
    const start = process.hrtime.bigint();
    run(PAIRS);
    perPair.push(Number(process.hrtime.bigint() - start) / PAIRS);
    between();
  }
  return median(perPair);
}

/** ns per pair that a C++ loop of the addon reports for itself. */
function timeNative(loop) {
  for (let warm = 0; warm < 3; warm++) loop();
  return median(Array.from({ length: RUNS }, loop));
}

const stream = Stream.create();
const ref = streamRef(stream, 'call-gap');
const idle = () => stream.synchronizeSync();
const rows = [
  ['alloc + free, C++ loop', timeNative(() => addon.allocFreeLoop(0, PAIRS, BYTES))],
  ['alloc + free, native calls', timeLoop((n) => {
    for (let i = 0; i < n; i++) native.deviceBufferFree(native.deviceBufferAlloc(ref, BYTES, false), undefined, false);
  }, idle)],
  ['alloc + free, DeviceBuffer', timeLoop((n) => {
    for (let i = 0; i < n; i++) DeviceBuffer.alloc(BYTES, { stream }).free();
  }, idle)],
  ['create + destroy, C++ loop', timeNative(() => addon.streamCreateDestroyLoop(0, PAIRS))],
  ['create + destroy, native calls', timeLoop((n) => {
    for (let i = 0; i < n; i++) native.streamDestroy(native.streamCreate(0, true, 0, -1));
  })],
  ['create + destroy, Stream', timeLoop((n) => {
    for (let i = 0; i < n; i++) Stream.create().destroy();
  })],
];
stream.destroy();
for (const [name, ns] of rows) console.log(`${name.padEnd(32)} ${ns.toFixed(0).padStart(6)} ns`);
