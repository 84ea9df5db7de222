// Type-level tests of typed kernels, checked by tsc in `npm test` (this file is compiled, never run): each wrong
// argument carries `// @ts-expect-error` on its exact line, so a missing error and an unexpected one both fail tsc.
import type { DeviceBuffer, Kernel, KernelArguments, Module, ParamType, Stream } from 'cuda-stream-pool';

/** Launches with a signature given as a literal array: the argument types are inferred from it. */
export function literalSignature(module: Module, buffer: DeviceBuffer, stream: Stream): void {
  const scale = module.getFunction('scale', ['ptr', 'f32', 'u32']);
  scale.launch({ grid: 1, block: 256, stream }, buffer, 2.5, 1000);
  scale.launch({ grid: 1, block: 256, stream }, buffer.ptr, 2.5, 1000);
  // @ts-expect-error a string is not an f32
  scale.launch({ grid: 1, block: 256, stream }, buffer, '2.5', 1000);
  // @ts-expect-error a number is not a ptr
  scale.launch({ grid: 1, block: 256, stream }, 0, 2.5, 1000);
  // @ts-expect-error one argument missing
  scale.launch({ grid: 1, block: 256, stream }, buffer, 2.5);
  // @ts-expect-error one argument too many
  scale.launch({ grid: 1, block: 256, stream }, buffer, 2.5, 1000, 1);
  // @ts-expect-error a bigint is not a u32
  scale.launch({ grid: 1, block: 256, stream }, buffer, 2.5, 1000n);
}

/** A signature declared elsewhere `as const` types the kernel the same way; 64-bit integers take bigints or numbers. */
export function constSignature(module: Module, buffer: DeviceBuffer): void {
  const signature = ['u64', 'ptr', 'i64'] as const;
  const spin = module.getFunction('spin', signature);
  spin.launch({ grid: 1, block: 1 }, 5n, buffer, -3);
  spin.launch({ grid: 1, block: 1 }, 5, 0n, -3n);
  // @ts-expect-error a DeviceBuffer is not a u64
  spin.launch({ grid: 1, block: 1 }, buffer, buffer, 1);
  // @ts-expect-error the old option name is gone: dynamic shared memory is dynamicSharedMemBytes
  spin.launch({ grid: 1, block: 1, sharedMemBytes: 0 }, 5n, buffer, 1);
  spin.launch({ grid: 1, block: 1, dynamicSharedMemBytes: 1024 }, 5n, buffer, 1);
}

/** The argument types may be named instead of inferred. */
export function namedArguments(module: Module, buffer: DeviceBuffer, signature: readonly ParamType[]): void {
  const kernel = module.getFunction<[DeviceBuffer, number]>('fill', signature);
  kernel.launch({ grid: 1, block: 1 }, buffer, 7);
  // @ts-expect-error the named types say a DeviceBuffer comes first
  kernel.launch({ grid: 1, block: 1 }, 7, buffer);
  // A signature that is not a literal gives a loosely typed kernel: any count of values of any parameter type.
  const loose = module.getFunction('fill', signature);
  loose.launch({ grid: 1, block: 1 }, buffer, 7, 8n);
  // @ts-expect-error no parameter type takes a string
  loose.launch({ grid: 1, block: 1 }, buffer, 'seven');
  // Typed kernels are still Kernels.
  const plain: Kernel = kernel;
  void plain;
}

/** KernelArguments maps each parameter type to the values it takes. */
export const mapped: KernelArguments<['ptr', 'f64', 'u64']> = [0n, 1.5, 2n];
// @ts-expect-error an f64 takes a number, not a string
export const wrong: KernelArguments<['ptr', 'f64']> = [0n, 'x'];
