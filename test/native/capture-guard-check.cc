// Races device-wide calls, deferred calls and captures through the capture guard (packages/cuda-stream-pool/src/stream/capture.cc), so
// test/native/capture-guard.test.ts can check its handshake without a GPU: no call runs while a capture is open, and every
// deferred call runs (on the guard's thread) once the captures are over. Prints the counts as name=value.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "stream/capture.h"

namespace {

constexpr int kDevice = 3;
std::atomic<int> overlaps{0}, queued{0}, ran{0}, refused{0}, made{0};
std::atomic<int> capture_open{0}, calls_running{0};  // deferred calls may run after their round: not on its stack

// One race: two threads open and close captures while three make device-wide calls and defer others.
void race() {
  std::atomic<bool> stop{false};
  auto busy = [](int spins) {
    for (volatile int i = 0; i < spins; i = i + 1) {
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; t++)  // captures, begun and ended as quickly as the guard lets them
    threads.emplace_back([&] {
      while (!stop.load()) {
        csp::capture_opening(kDevice);
        capture_open.fetch_add(1);
        if (calls_running.load() != 0) overlaps.fetch_add(1);
        busy(2000);
        capture_open.fetch_sub(1);
        csp::capture_closing(kDevice);
        busy(6000);
      }
    });
  for (int t = 0; t < 3; t++)  // device-wide calls: made only when allowed, and deferred calls
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20000; i++) {
        if ((i + t) % 4 == 0) {
          queued.fetch_add(1);
          csp::outside_captures(kDevice, [] {
            if (capture_open.load() != 0) overlaps.fetch_add(1);
            ran.fetch_add(1);
          });
          continue;
        }
        csp::DeviceWideCall call(kDevice);
        if (!call.allowed()) {
          refused.fetch_add(1);
          continue;
        }
        made.fetch_add(1);
        calls_running.fetch_add(1);
        if (capture_open.load() != 0) overlaps.fetch_add(1);
        busy(300);
        calls_running.fetch_sub(1);
      }
    });
  for (size_t t = 2; t < threads.size(); t++) threads[t].join();
  stop.store(true);
  threads[0].join();
  threads[1].join();
}

}  // namespace

int main() {
  for (int round = 0; round < 8; round++) race();
  // Deferred calls run on the guard's own thread once no capture is open: give it up to 10 s.
  for (int waited = 0; ran.load() < queued.load() && waited < 10000; waited++)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::printf("overlaps=%d queued=%d ran=%d made=%d refused=%d open=%d\n", overlaps.load(), queued.load(), ran.load(),
              made.load(), refused.load(), csp::open_captures(kDevice));
  return 0;
}
