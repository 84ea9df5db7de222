// The README's example: many tasks at once, each on its own leased pool stream. Run by test/examples.test.ts.
import { StreamPool, DeviceBuffer, Program } from 'cuda-stream-pool';

/** Returns each partition multiplied by `factor`, computed on the GPU, one pool stream per task. */
export async function scalePartitions(partitions: Float32Array[], factor: number): Promise<Float32Array[]> {
  const pool = new StreamPool(); // 32 non-blocking streams, created once
  const module = await Program.compile(`
    extern "C" __global__ void scale(float* v, float k, unsigned n) {
      unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) v[i] *= k;
    }`);
  const scale = module.getFunction('scale', ['ptr', 'f32', 'u32']);
  try {
    // Many tasks at once, each on its own stream: copies and kernels of different tasks overlap.
    return await Promise.all(
      partitions.map((input) =>
        pool.run(async (stream) => {
          // an exclusive lease; currentStream() is `stream` in here
          const n = input.length;
          const device = DeviceBuffer.alloc(4 * n); // stream-ordered, on currentStream()
          stream.copy(device, input); // pageable arrays go through pinned staging
          scale.launch({ grid: Math.ceil(n / 256), block: 256 }, device, factor, n);
          const output = new Float32Array(n);
          stream.copy(output, device);
          await device[Symbol.asyncDispose](); // free in stream order, then await the stream
          return output; // landed: the copy precedes the completion
        }),
      ),
    );
  } finally {
    pool.destroy();
    module.unload();
  }
}
