// The library's kernel for batches of small copies (Note [copy kernel] in copy-kernel.cc): one launch moves every
// piece, each piece by blocks of its own, reading and writing device and pinned host memory through unified addresses.
// Compiled to the PTX in copy-kernel-ptx.h by scripts/build-ptx.sh.
struct Piece {
  unsigned long long destination;
  unsigned long long source;
  unsigned long long bytes;
};
// Passed by value in the launch's parameter space (4 KiB on every supported driver): no table in device memory to
// write, keep alive or order.
struct Pieces {
  Piece piece[128];
};

extern "C" __global__ void __launch_bounds__(256) cuda_stream_pool_copy_pieces(unsigned count, Pieces pieces) {
  if (blockIdx.x >= count) return;
  const Piece p = pieces.piece[blockIdx.x];
  char* destination = reinterpret_cast<char*>(p.destination);
  const char* source = reinterpret_cast<const char*>(p.source);
  // Vectors of 16 bytes where both ends allow it, four in flight per thread: reads of host memory cross the bus.
  const bool aligned = ((p.destination | p.source) & 15) == 0;
  const unsigned long long vectors = aligned ? p.bytes / 16 : 0;
  const unsigned long long stride = static_cast<unsigned long long>(blockDim.x) * gridDim.y;
  const unsigned long long first = static_cast<unsigned long long>(blockIdx.y) * blockDim.x + threadIdx.x;
  const uint4* in = reinterpret_cast<const uint4*>(source);
  uint4* out = reinterpret_cast<uint4*>(destination);
  unsigned long long i = first;
  for (; i + 3 * stride < vectors; i += 4 * stride) {
    const uint4 a = in[i], b = in[i + stride], c = in[i + 2 * stride], d = in[i + 3 * stride];
    out[i] = a;
    out[i + stride] = b;
    out[i + 2 * stride] = c;
    out[i + 3 * stride] = d;
  }
  for (; i < vectors; i += stride) out[i] = in[i];
  for (unsigned long long b = vectors * 16 + first; b < p.bytes; b += stride) destination[b] = source[b];
}
