// The README's example: many tasks at once, each on its own leased pool stream. Run by test/gpu/examples.test.ts.
import { DeviceBuffer, Program, StreamPool, type Module } from 'cuda-stream-pool';

const SCALE_SOURCE = `
  extern "C" __global__ void scale(float* values, float factor, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) values[i] *= factor;
  }`;

/** Scales partitions of numbers on the GPU. The pool and the compiled kernel are made once, in `create()`, and
 * serve every call; dispose of the scaler when done. */
export class PartitionScaler {
  readonly #pool: StreamPool;
  readonly #program: Module;
  readonly #scale;

  private constructor(pool: StreamPool, program: Module) {
    this.#pool = pool;
    this.#program = program;
    // The signature types the kernel: launch() takes (buffer, number, number), checked by the compiler.
    this.#scale = program.getFunction('scale', ['ptr', 'f32', 'u32']);
  }

  /** Compiles the kernel and creates the pool; call once, at start-up. */
  static async create(): Promise<PartitionScaler> {
    const program = await Program.compile(SCALE_SOURCE); // compiled once; a later compile of it hits the cache
    return new PartitionScaler(new StreamPool(), program); // 32 non-blocking streams, created once
  }

  /** Returns each partition multiplied by `factor`. Each partition is a task with its own leased stream, so the
   * copies and kernels of different tasks overlap. */
  scale(partitions: Float32Array[], factor: number): Promise<Float32Array[]> {
    return Promise.all(
      partitions.map((input) =>
        // An exclusive lease: inside, currentStream() is the leased stream, the default for every call below.
        this.#pool.run(async () => {
          using values = DeviceBuffer.from(input); // stream-ordered allocation and copy; freed at the end of the block
          this.#scale.launch({ grid: Math.ceil(input.length / 256), block: 256 }, values, factor, input.length);
          return await values.toArray(Float32Array); // the copy back, awaited without blocking the event loop
        }),
      ),
    );
  }

  /** Destroys the pool and unloads the kernel. */
  [Symbol.dispose](): void {
    this.#pool.destroy();
    this.#program.unload();
  }
}
