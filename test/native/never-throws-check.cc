// A small program of its own around packages/cuda-stream-pool/src/internal/never-throws.h: each mode throws something inside never_throws, from
// one thread or many, and prints what callback_failures() then holds ("count|last"). test/native/never-throws.test.ts runs it.
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "internal/never-throws.h"

using csp::callback_failures;
using csp::never_throws;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "standard") {
    never_throws("a finalizer", [] { throw std::runtime_error("out of handles"); });
  } else if (mode == "other") {
    never_throws("a cleanup hook", [] { throw 42; });
  } else if (mode == "quiet") {
    never_throws("a finalizer", [] {});
  } else if (mode == "long") {
    const std::string message(1000, 'x');
    never_throws("a finalizer", [&] { throw std::runtime_error(message); });
  } else if (mode == "threads") {
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; t++)
      threads.emplace_back([] {
        for (int i = 0; i < 1000; i++) never_throws("a thread's body", [] { throw std::logic_error("failed"); });
      });
    for (auto& thread : threads) thread.join();
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  std::printf("%llu|%s\n", static_cast<unsigned long long>(callback_failures().count()), callback_failures().last().c_str());
  return 0;
}
