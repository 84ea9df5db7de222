// What recording one `event.record(stream)` costs the JS thread: rounds of calls on an idle stream (few enough that
// the deferred queue never fills), a blocking wait between rounds, the median of the rounds after a warm-up.
// Compare CUDA_STREAM_POOL_SUBMISSION=deferred and direct, and a process held to one CPU (`taskset -c 0 node ...`),
// where the submission thread runs only when the JS thread gives up the CPU, against two: the difference is what
// the two cores' shared cache lines cost. Built code from dist/ (npm run build or npx tsc first). On a GPU, or on the
// null driver (scripts/null-driver.cc):
//   CUDA_STREAM_POOL_LIBCUDA=/tmp/null-driver/libcuda.so.1 CUDA_STREAM_POOL_SUBMISSION=deferred node scripts/record-cost.mjs [calls per round]
import { cuda, Event, Stream } from 'cuda-stream-pool';

const calls = Number(process.argv[2] ?? 1500);
const stream = Stream.create();
const event = Event.create();
const perCall = [];
for (let round = 0; round < 2000; round++) {
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) event.record(stream);
  const ns = Number(process.hrtime.bigint() - start) / calls;
  stream.synchronizeSync();
  if (round >= 200) perCall.push(ns);
}
perCall.sort((a, b) => a - b);
const at = (q) => perCall[Math.floor(q * (perCall.length - 1))].toFixed(0);
console.log(`${cuda.submission().mode}: ${at(0.5)} ns per event.record (p10 ${at(0.1)}, p90 ${at(0.9)}), ${calls} calls a round`);
event.destroy();
stream.destroy();
