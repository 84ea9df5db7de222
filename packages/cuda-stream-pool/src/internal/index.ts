// The package's internal entry point, `cuda-stream-pool/internal`, for the benchmark package only. The benchmark
// compares the library with native C++ baselines, and to do so it must reach a few things the public API keeps
// private: the native handle of a stream (its addon runs work on the same streams), the completion marker in use,
// the kernel argument packer (to time it alone), the NVRTC version, and where a package's addon binary is. Nothing
// here is covered by semantic versioning; users import `cuda-stream-pool`.
export { addonPath, native } from '../binding/binding.js';
export { streamRef, streamHandle } from '../stream/stream.js';
export { ArgumentPacker } from '../kernel/argument-packer.js';
export { nvrtcInfo } from '../kernel/program.js';
