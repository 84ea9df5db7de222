// Asymmetric fences: a cheap fence for a thread on a hot path, paired with a costly one for a thread about to sleep.
// See Note [asymmetric fences].
//
// Note [asymmetric fences]: a publisher stores a count and then checks whether the consumer sleeps; the consumer sets
// its sleeping flag and then checks the count once more. Each side's store must be seen before its own load (a
// StoreLoad order), else both can miss the other and a wake-up is lost. A sequentially consistent store gives that
// order but, on x86, drains the store buffer, and the publisher's buffer holds the lines of the record it just wrote,
// which the consumer's core last read: the JS thread stalled there about 100 ns per recorded operation. The
// publisher instead uses light_fence() (a compiler barrier) and the consumer, which sleeps rarely, heavy_fence():
// membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which runs a full memory barrier on every CPU running a thread of
// this process before it returns. So either the publisher's store was made before that barrier and the consumer's
// check sees it, or the publisher's check comes after it and sees the flag. Where the kernel lacks that command
// (Linux before 4.14, some sandboxes) both fences are full fences.
#pragma once
#include <atomic>

namespace csp {

// Whether heavy_fence() is a membarrier: registered once, on the first call (a submitter's construction makes it).
bool membarrier_fences();

// The hot side's fence: orders its earlier stores before its later loads against a heavy_fence() of another thread.
inline void light_fence() {
  if (membarrier_fences())
    std::atomic_signal_fence(std::memory_order_seq_cst);
  else
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

// The sleeping side's fence, paired with light_fence(). Costs a system call (a few microseconds). False when the
// membarrier failed although it was registered (Linux may fail it for want of memory): the other side's light fence
// was then no fence, so the caller must not sleep for good on what it read (it waits with a timeout instead).
bool heavy_fence();

}  // namespace csp
