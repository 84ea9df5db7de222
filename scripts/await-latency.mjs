// The latency of one await at a time: a 4-byte fill on a stream, then `await stream.synchronize()`, repeated, with
// nothing else on the thread; wall time and the JS thread's CPU time per await (medians of 5 rounds after one not
// counted), and the completion engine's counters (how many awaits were delivered by a wake-up, by a spin before
// blocking, or settled at once). Compare CUDA_STREAM_POOL_WAIT_SPIN=on and off in separate processes, alternating (a
// small machine's figures move by 3× from run to run).
// Linux only; built code from dist/ (npm run build or npx tsc first). On a GPU, or on the simulated driver:
//   CUDA_STREAM_POOL_LIBCUDA=/tmp/simulated-driver/libcuda.so.1 node scripts/await-latency.mjs [awaits per round]
import { readFileSync } from 'node:fs';

import { completionStats, DeviceBuffer, Stream } from 'cuda-stream-pool';

const awaits = Number(process.argv[2] ?? 4000);
const stream = Stream.create();
const buffer = DeviceBuffer.alloc(64, { stream });
/** Nanoseconds the main thread has run on a CPU (its own, not the library's threads). */
const cpuNs = () => Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]);

const wall = [];
const cpu = [];
const before = completionStats();
for (let round = -1; round < 5; round++) {
  const wallStart = process.hrtime.bigint();
  const cpuStart = cpuNs();
  for (let i = 0; i < awaits; i++) {
    stream.fill(buffer, i & 255, { byteLength: 4 });
    await stream.synchronize();
  }
  if (round < 0) continue;
  wall.push(Number(process.hrtime.bigint() - wallStart) / awaits / 1000);
  cpu.push((cpuNs() - cpuStart) / awaits / 1000);
}
const after = completionStats();
const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];
const count = (name) => after[name] - before[name];
console.log(`${median(wall).toFixed(2)} µs per await (wall), ${median(cpu).toFixed(2)} µs of the JS thread's CPU`);
console.log(`  of ${6 * awaits} awaits: ${count('delivered')} through the engine, ${count('wakeups')} wake-ups, ${count('spins')} spins of which ${count('spinsCompleted')} saw their completion`);
buffer.free();
stream.destroy();
