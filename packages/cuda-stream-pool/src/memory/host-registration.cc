// Host memory that JS already has (an ArrayBuffer or SharedArrayBuffer), page-locked in place so that copies from
// and to it run as pinned copies. Runs on: any JS thread (main or worker).
#include <unistd.h>

#include <map>
#include <mutex>
#include <vector>

#include "binding/binding.h"
#include "internal/context.h"
#include "internal/live-counters.h"
#include "internal/loader.h"
#include "internal/memory.h"
#include "internal/v8-memory.h"

namespace csp {

// Note [registered host memory]: HostRegistration.register(buffer) page-locks the pages under an ArrayBuffer's
// memory with cuMemHostRegister (PORTABLE: every device's context sees it), and the copies the library queues with
// any view of that ArrayBuffer then take the pinned path, with the fences of Note [pinned cache]. What keeps it safe:
//  - The memory stays alive while registered or used by a queued copy, whatever JS does with the ArrayBuffer: the
//    registration holds V8's backing store (hold_memory, Note [V8 in one place]), so a transfer to another thread or
//    a detach moves or drops the JS object, never the memory. The library refuses copies with a detached buffer.
//  - The driver page-locks whole pages, and two registrations of one page fail. Node allocates ArrayBuffers where
//    the allocator puts them, so two may share a page: a registration whose pages overlap another's is refused, and
//    one of the same memory (the same buffer again, in any thread) shares the first with a count. Buffers that are
//    slices of Node's shared pool are refused in JS: their pages hold other Buffers.
//  - Unregistering (the count reaching 0) retires the object, waiting for copies being queued on it, and hands the
//    pages to the pinned cache, which unregisters them and lets the backing store go once the queued copies are
//    done: at once when they are, else at the cache's next use (a PinnedBuffer, a staged copy, trimCache()).
//  - A thread that exits or is terminated ends its registrations (the environment's cleanup hook), as it gives its
//    leases back. A graph cannot capture a copy of registered memory (stream/copy.ts refuses it): the graph would
//    outlive the registration.

namespace {

struct Registration {
  std::shared_ptr<NativePinnedBuffer> object;
  uintptr_t begin = 0, end = 0;    // the registered pages
  std::map<int, int> environments;  // the registrations of each environment (thread) that share it
};

std::mutex& registrations_mutex() {
  static std::mutex* mutex = new std::mutex();  // never destroyed: a registration may end during exit
  return *mutex;
}

// By the first registered page.
std::map<uintptr_t, Registration>& registrations() {
  static auto* map = new std::map<uintptr_t, Registration>();
  return *map;
}

uintptr_t page_size() {
  static const uintptr_t size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return size;
}

void watch_environment(Napi::Env env);

// hostRegister(buffer: ArrayBuffer | SharedArrayBuffer) -> { ref } once registered (or shared with a registration
// of the same memory), or { overlaps: [begin, end] }: the pages of another registration that share a page with it.
// registered: its pages' bytes. The buffer is neither detached nor empty (host-registration.ts checks).
Napi::Value host_register(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  HeldMemory memory = hold_memory(info[0]);
  if (!memory.data || memory.bytes == 0)
    throw Napi::Error::New(env, "cuda-stream-pool internal: hostRegister of a detached or empty buffer");
  const uintptr_t data = reinterpret_cast<uintptr_t>(memory.data);
  const uintptr_t begin = data & ~(page_size() - 1);
  const uintptr_t end = (data + memory.bytes + page_size() - 1) & ~(page_size() - 1);
  Napi::Object out = Napi::Object::New(env);
  std::lock_guard<std::mutex> lock(registrations_mutex());
  auto& map = registrations();
  auto next = map.lower_bound(begin);
  auto clash = map.end();
  if (next != map.end() && next->first < end) clash = next;
  if (next != map.begin() && std::prev(next)->second.end > begin) clash = std::prev(next);
  if (clash != map.end()) {
    Registration& other = clash->second;
    if (reinterpret_cast<uintptr_t>(other.object->data) == data && other.object->bytes == memory.bytes) {
      other.environments[environment_of(env)]++;
      out.Set("ref", wrap_native(env, other.object));
      out.Set("registered", static_cast<double>(other.end - other.begin));
      return out;
    }
    Napi::Array overlap = Napi::Array::New(env, 2);
    overlap.Set(0u, static_cast<double>(other.begin));
    overlap.Set(1u, static_cast<double>(other.end));
    out.Set("overlaps", overlap);
    return out;
  }
  const int device = context_device();
  make_current(device);
  check(drv().cuMemHostRegister(reinterpret_cast<void*>(begin), end - begin, CU_MEMHOSTREGISTER_PORTABLE),
        "cuMemHostRegister", device, [&] {
          return device_text(device) + ", " + std::to_string(end - begin) + " bytes of host memory (the pages under a buffer of " +
                 std::to_string(memory.bytes) + " bytes)";
        });
  auto object = make_native<NativePinnedBuffer>();
  object->data = memory.data;
  object->bytes = memory.bytes;
  object->counted = false;  // counted as registered bytes, not as pinned memory the library allocated
  object->block = registered_block(reinterpret_cast<void*>(begin), end - begin, device, std::move(memory.keep));
  map[begin] = Registration{object, begin, end, {{environment_of(env), 1}}};
  watch_environment(env);
  live().registered_bytes += static_cast<int64_t>(end - begin);
  out.Set("ref", wrap_native(env, object));
  out.Set("registered", static_cast<double>(end - begin));
  return out;
}

// Ends one registration of `environment`'s on the memory of `it`. Holds registrations_mutex; returns the object
// when that was the last registration of all, for retire() after unlocking, else null.
std::shared_ptr<NativePinnedBuffer> end_one(std::map<uintptr_t, Registration>::iterator it, int environment) {
  Registration& registration = it->second;
  auto mine = registration.environments.find(environment);
  if (mine == registration.environments.end()) return nullptr;
  if (--mine->second == 0) registration.environments.erase(mine);
  if (!registration.environments.empty()) return nullptr;
  live().registered_bytes -= static_cast<int64_t>(registration.end - registration.begin);
  std::shared_ptr<NativePinnedBuffer> object = std::move(registration.object);
  registrations().erase(it);
  return object;
}

// Refuses later copies with `object` (waiting only for copies being queued with it by other threads) and hands its
// pages to the pinned cache, which unregisters them once the queued copies are done.
void retire(const std::shared_ptr<NativePinnedBuffer>& object) {
  // First: a copy being queued or issued with it (a recorded one holds an entry until issued) still fences the block.
  object->free();
  Block* block = object->block;
  object->block = nullptr;
  release_registered(block);
}

// The environment's cleanup hook (its thread exits or is terminated): ends every registration it still holds.
void end_environment(int environment) {
  std::vector<std::shared_ptr<NativePinnedBuffer>> ended;
  {
    std::lock_guard<std::mutex> lock(registrations_mutex());
    auto& map = registrations();
    for (auto it = map.begin(); it != map.end();) {
      auto next = std::next(it);
      auto mine = it->second.environments.find(environment);
      if (mine != it->second.environments.end()) {
        mine->second = 1;  // every one of this environment's at once
        if (auto object = end_one(it, environment)) ended.push_back(std::move(object));
      }
      it = next;
    }
  }
  for (auto& object : ended) retire(object);
}

void watch_environment(Napi::Env env) {
  static thread_local bool watched = false;  // one hook per environment (an environment is one thread)
  if (watched) return;
  watched = true;
  const int environment = environment_of(env);
  env.AddCleanupHook([environment]() {
    watched = false;
    never_throws("host registration cleanup hook", [&] { end_environment(environment); });
  });
}

// hostUnregister(ref): ends one registration of the calling environment; the last of all retires the object (copies
// are refused from now on) and hands its pages to the pinned cache, which unregisters them once the queued copies
// are done.
Napi::Value host_unregister(const Napi::CallbackInfo& info) {
  auto object = unwrap_native<NativePinnedBuffer>(info[0]);
  release_native(info[0]);
  const int environment = environment_of(info.Env());
  std::shared_ptr<NativePinnedBuffer> ended;
  {
    std::lock_guard<std::mutex> lock(registrations_mutex());
    auto& map = registrations();
    for (auto it = map.begin(); it != map.end(); ++it)
      if (it->second.object == object) {
        ended = end_one(it, environment);
        break;
      }
  }
  if (ended) retire(ended);
  return info.Env().Undefined();
}

}  // namespace

// The exports of this file; test/cpu/contract.test.ts checks them against NativeBinding.
const Export kHostRegistrationExports[] = {
    {"hostRegister", "object", entry<host_register>},
    {"hostUnregister", "ref", entry<host_unregister>},
};

void register_host_registration(Napi::Env env, Napi::Object exports) {
  export_all(env, exports, kHostRegistrationExports);
}

}  // namespace csp
