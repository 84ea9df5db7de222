// A small program of its own around packages/cuda-stream-pool/src/internal/native-allocation.h: each mode makes
// cache-line aligned objects with make_native and prints what it saw. test/native/native-allocation.test.ts runs it.
#include <malloc.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "internal/native-allocation.h"

using csp::kCacheLineBytes;
using csp::make_native;

namespace {

std::atomic<long> constructed{0};
std::atomic<long> destroyed{0};
std::atomic<bool> throw_next{false};

// Shaped like a native object: a counter on a cache line of its own, then `Bytes` of payload.
template <size_t Bytes>
struct Probe {
  alignas(kCacheLineBytes) std::atomic<uint64_t> counter{0};
  unsigned char payload[Bytes];
  Probe() {
    if (throw_next.exchange(false)) throw std::runtime_error("constructor failed");
    std::memset(payload, 0xab, sizeof payload);
    constructed++;
  }
  ~Probe() { destroyed++; }
};

template <size_t Bytes>
bool aligned(const std::shared_ptr<Probe<Bytes>>& probe) {
  return reinterpret_cast<std::uintptr_t>(probe.get()) % kCacheLineBytes == 0 &&
         reinterpret_cast<std::uintptr_t>(&probe->counter) % kCacheLineBytes == 0 && probe->payload[Bytes - 1] == 0xab;
}

size_t heap_in_use() { return mallinfo2().uordblks; }

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "align") {
    // Objects of several sizes, interleaved so that malloc hands out blocks at many offsets; all kept alive at once.
    std::vector<std::shared_ptr<void>> kept;
    long misaligned = 0;
    for (int i = 0; i < 3000; i++) {
      auto a = make_native<Probe<1>>();
      auto b = make_native<Probe<100>>();
      auto c = make_native<Probe<1000>>();
      misaligned += !aligned(a) + !aligned(b) + !aligned(c);
      kept.push_back(a);
      kept.push_back(b);
      kept.push_back(c);
    }
    const long alive = constructed - destroyed;
    kept.clear();
    std::printf("%ld|%ld|%ld\n", misaligned, alive, constructed - destroyed.load());
  } else if (mode == "weak") {
    // The object dies with its last shared_ptr; its memory (the control block) with the last weak_ptr.
    std::weak_ptr<Probe<8>> weak;
    {
      auto probe = make_native<Probe<8>>();
      weak = probe;
    }
    std::printf("%d|%ld\n", weak.expired() ? 1 : 0, destroyed.load());
  } else if (mode == "threads") {
    // Made on one thread, released on another: 8 pairs of threads handing 20,000 objects over.
    std::vector<std::thread> threads;
    std::atomic<long> misaligned{0};
    for (int t = 0; t < 8; t++)
      threads.emplace_back([&misaligned] {
        std::vector<std::shared_ptr<Probe<40>>> made;
        for (int i = 0; i < 20000; i++) {
          made.push_back(make_native<Probe<40>>());
          if (!aligned(made.back())) misaligned++;
        }
        std::thread releaser([made = std::move(made)]() mutable { made.clear(); });
        releaser.join();
      });
    for (auto& thread : threads) thread.join();
    std::printf("%ld|%ld|%ld\n", misaligned.load(), constructed.load(), destroyed.load());
  } else if (mode == "throws") {
    // A constructor that throws gives its memory back: 20,000 failed makes leave the heap as it was.
    for (int i = 0; i < 100; i++) make_native<Probe<200>>();  // the heap's own bookkeeping settles first
    const size_t before = heap_in_use();
    long caught = 0;
    for (int i = 0; i < 20000; i++) {
      throw_next = true;
      try {
        make_native<Probe<200>>();
      } catch (const std::runtime_error&) {
        caught++;
      }
    }
    const long grown = static_cast<long>(heap_in_use()) - static_cast<long>(before);
    std::printf("%ld|%d\n", caught, grown < 4096 ? 1 : 0);
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  return 0;
}
