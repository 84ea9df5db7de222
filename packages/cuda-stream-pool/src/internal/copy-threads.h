// Copy threads: host memcpys of staged copies, split into pieces and run in parallel.
//
// Note [copy threads]: a staged copy moves its bytes between pageable JS memory and pinned staging with memcpy
// (Note [staging] in staging.cc). One thread copies about 5-10 GB/s; the link moves 50 GB/s. So a large copy's
// memcpy is split into pieces that a small process-wide pool of native threads named "csp-copy" copies together
// with the calling thread, which waits, copying pieces itself, until the last piece is done. No JS runs meanwhile,
// so the JS memory cannot be detached or changed under the copy.
//  - The pool starts on first use and never ends; its threads spin for 500 us after their last piece (copies made one
//    after another find them awake), then park on a condition variable (no CPU when idle). CUDA_STREAM_POOL_COPY_THREADS sets how many (0 to 15); the default is one less than the
//    machine's hardware threads, at most 7. A thread that cannot start leaves its share to the caller: never a
//    lost or failed copy, only a slower one.
//  - Several copies (of several JS threads) can run at once: each caller works on its own copy, and the pool's
//    threads help the oldest copy with pieces left.
//  - The caller learns, in order, how far the copied prefix has grown (`prefix_done`), so that a host-to-device copy
//    queues each part's device copy as soon as its bytes are in staging: the snapshot and the device copies overlap.
#pragma once
#include <cstddef>
#include <functional>

namespace csp {

// Runs copy_piece(k) for every k in [0, pieces), on the calling thread and the copy threads, and returns once all
// are done. On the calling thread, after each growth of the done prefix (pieces 0 to n - 1 all copied), calls
// prefix_done(n) when given; the last call has n == pieces. copy_piece must not throw. If prefix_done throws, the
// pieces not begun are skipped, and the exception leaves once no copy thread runs a piece any more.
void copy_in_parallel(size_t pieces, const std::function<void(size_t)>& copy_piece,
                      const std::function<void(size_t)>& prefix_done = {});

// Evicts `bytes` from `from` on from every cache level, on a copy thread with no copy to help (never before a copy
// offered earlier or later), and returns at once; nothing when no copy thread runs. The memory must stay mapped
// for good (staging). Any thread. See Note [staging eviction] in staging.cc.
void evict_in_background(const char* from, size_t bytes);

// Bytes evicted so far by evict_in_background, process-wide. Any thread.
size_t evicted_bytes();

// The copy threads running now (0 before the first parallel copy). Any thread.
int copy_threads_running();

}  // namespace csp
