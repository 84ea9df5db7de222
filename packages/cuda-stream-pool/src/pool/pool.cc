// The stream pool's process-wide shared state: its streams and the block of shared words (round-robin counter,
// lease words, waiting-thread table) that every thread sees as one SharedArrayBuffer. Mechanism only: the policy
// is plain TS in pool/pool-policy.ts. See Note [pool hand-out] in pool/pool.ts, Note [pool shared words] in
// pool/pool-words.ts, and Note [one backing store] below. Runs on: any JS thread, except where a function says so.
//
// Note [one backing store]: every thread must see the pool's words as the same SharedArrayBuffer, so that
// Atomics.add/compareExchange act on one counter and Atomics.notify in one thread wakes Atomics.waitAsync in
// another. N-API (Node 20) cannot make a SharedArrayBuffer, so the pool uses V8's API (SharedWords, in
// internal/v8-memory.cc: Note [V8 in one place]): one v8::BackingStore over native memory, created once per pool and
// kept here; each thread gets its own v8::SharedArrayBuffer over that same store. An experiment (two workers and the
// main thread, 10^6 Atomics.add each on native memory) showed that Atomics.add is shared either way, but
// Atomics.notify wakes a waiter in another thread only when both SharedArrayBuffers share one BackingStore object:
// V8's futex wait list matches waiters by backing store, not only by address. A store made per thread over the same
// memory counted right and never woke anybody. The store's deleter frees the memory once the last SharedArrayBuffer
// in any thread and this registry have let go of it, on whichever thread that happens.

#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "binding/binding.h"
#include "internal/context.h"
#include "internal/v8-memory.h"
#include "internal/loader.h"
#include "stream/stream.h"
#include "internal/lock-order.h"

namespace csp {
namespace {

// Where the policy keeps what this file touches: pool/pool-words.ts `poolLayout()`, read by name at creation (Note
// [pool shared words] there, the one specification of the words and their transitions).
struct Layout {
  int32_t words = 0;         // total int32 words
  int32_t state = 0;         // the state word
  int32_t destroyed = 0;     // its value once destroyed
  int32_t waiting_envs = 0;  // how many waiting-table entries are registered
  int32_t attached_envs = 0; // how many environments hold a handle (Note [pool attachments])
  int32_t lease_base = 0;    // `size` lease words
  int32_t budget_base = 0;   // `size` 64-bit budgets, 8-byte aligned (two words each)
  int32_t memory_lock = 0;   // the environment admitting a budget now, or 0
  int32_t memory_turn = 0;   // the environment first in line for memory, or 0
  int32_t env_base = 0;      // the waiting table: env_entries entries of env_stride words
  int32_t env_entries = 0;
  int32_t env_stride = 0;
  int32_t env_wake_counter = 0;  // offsets in an entry; the entry's first word is the environment id
  int32_t env_waiters = 0;
  int32_t env_memory_waiters = 0;
};

int32_t load_word(int32_t* word) { return __atomic_load_n(word, __ATOMIC_SEQ_CST); }
void store_word(int32_t* word, int32_t value) { __atomic_store_n(word, value, __ATOMIC_SEQ_CST); }
void add_word(int32_t* word, int32_t value) { __atomic_fetch_add(word, value, __ATOMIC_SEQ_CST); }
bool swap_word(int32_t* word, int32_t expected, int32_t desired) {
  return __atomic_compare_exchange_n(word, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}


struct PoolState {
  int id = 0;
  int device = -1;  // -1: shared words without streams (the policy's CPU tests and their workers)
  int size = 0;
  bool non_blocking = true;
  int priority = 0;
  int partition = -1;  // the device partition its streams run on, or -1
  bool is_default = false;
  int owner_environment = 0;
  Layout layout;
  int32_t* words = nullptr;                   // owned by `memory`
  SharedWords memory;                         // one for every thread: Note [one backing store]
  std::vector<std::shared_ptr<NativeStream>> streams;
  // Handles not yet released, per environment (Note [pool attachments]); guarded by the registry mutex.
  std::map<int, int> attached;
  int handles = 0;  // their sum
  bool destroyed = false;

  PoolState() = default;
  PoolState(const PoolState&) = delete;  // one state per pool, shared by pointer
  PoolState& operator=(const PoolState&) = delete;
};

// Process-wide: live pools by id and the default pool of each device.
// Holds no JS reference. Leaked on purpose so that it outlives static destruction at exit.
struct Registry {
  OrderedMutex mutex{LockLevel::kPoolRegistry, "pool registry"};
  int next_id = 1;
  std::map<int, std::shared_ptr<PoolState>> pools;
  std::map<int, std::shared_ptr<PoolState>> defaults;  // by device ordinal; never destroyed
};

Registry& registry() {
  static Registry* instance = new Registry();
  return *instance;
}

// Marks the pool destroyed in every thread (the state word), forgets it, then destroys its streams; each
// NativeStream::destroy waits for driver calls in flight on that stream (Note [handle guard]). Idempotent.
void destroy_pool(const std::shared_ptr<PoolState>& state) {
  std::vector<std::shared_ptr<NativeStream>> streams;
  {
    std::lock_guard<OrderedMutex> lock(registry().mutex);
    if (state->destroyed) return;
    state->destroyed = true;
    store_word(&state->words[state->layout.state], state->layout.destroyed);
    registry().pools.erase(state->id);
    streams.swap(state->streams);
  }
  for (auto& stream : streams) stream->destroy();
}

/* Note [pool attachments]: each JS handle (a StreamPool object in some thread) counts once in its pool, under its
 * environment, from its creation until it is released: by poolDetach (the object's destroy() or close() detached
 * its thread) or by its finalizer (GC or environment teardown), whichever comes first. The release of the last
 * handle of a pool that was not destroyed and is not a default pool destroys it. So once the creating thread is gone
 * (its handle finalized at its teardown), the last detach in the other threads destroys the pool and its streams at
 * once, without waiting for a GC; and a pool forgotten by every thread is destroyed by its finalizers.
 * The number of environments holding a handle is published in the shared words (attachedEnvs), so that a thread
 * can tell, without a call, that no other thread could give it a lease (Note [pool waiting] in pool/pool-policy.ts).
 * Called with the registry mutex held. */
void count_handle(PoolState& state, int environment, int delta) {
  int& count = state.attached[environment];
  count += delta;
  state.handles += delta;
  if (count == 0) state.attached.erase(environment);
  store_word(&state.words[state.layout.attached_envs], static_cast<int32_t>(state.attached.size()));
}

// One JS handle. See Note [pool attachments].
struct PoolHandle {
  static const napi_type_tag kTag;
  static constexpr const char* kName = "StreamPool";
  std::shared_ptr<PoolState> state;
  int environment;
  bool counted = true;  // guarded by the registry mutex

  // The caller has already counted this handle (count_handle), under the registry mutex.
  PoolHandle(std::shared_ptr<PoolState> counted_state, int env) : state(std::move(counted_state)), environment(env) {}
  PoolHandle(const PoolHandle&) = delete;  // each handle is counted once
  PoolHandle& operator=(const PoolHandle&) = delete;
  // Gives the count back once; the last release of a pool that is not a default pool destroys it. Idempotent.
  void release() {
    bool last = false;
    {
      std::lock_guard<OrderedMutex> lock(registry().mutex);
      if (!counted) return;
      counted = false;
      count_handle(*state, environment, -1);
      last = state->handles == 0 && !state->is_default;
    }
    if (last) destroy_pool(state);
  }
  // Runs on: the JS thread that owned the handle, from a basic finalizer (GC or environment teardown).
  ~PoolHandle() {
    never_throws("StreamPool finalizer", [&] { release(); });
  }
};

const napi_type_tag PoolHandle::kTag = {0x6373702d706f6f6cULL, 0x0000000000000001ULL};

Layout read_layout(const Napi::Value& value) {
  Napi::Object object = value.As<Napi::Object>();
  auto at = [&](const char* name) { return object.Get(name).As<Napi::Number>().Int32Value(); };
  Layout layout;
  layout.words = at("words");
  layout.state = at("state");
  layout.destroyed = at("destroyed");
  layout.waiting_envs = at("waitingEnvs");
  layout.attached_envs = at("attachedEnvs");
  layout.lease_base = at("leaseBase");
  layout.budget_base = at("budgetBase");
  layout.memory_lock = at("memoryLock");
  layout.memory_turn = at("memoryTurn");
  layout.env_base = at("envBase");
  layout.env_entries = at("envEntries");
  layout.env_stride = at("envStride");
  layout.env_wake_counter = at("envWakeCounter");
  layout.env_waiters = at("envWaiters");
  layout.env_memory_waiters = at("envMemoryWaiters");
  return layout;
}

// Allocates the zeroed words and the one backing store every thread will share.
std::shared_ptr<PoolState> new_state(int size, const Layout& layout) {
  auto state = std::make_shared<PoolState>();
  state->size = size;
  state->layout = layout;
  state->memory = SharedWords::allocate((static_cast<size_t>(layout.words) * sizeof(int32_t) + 63) / 64 * 64);
  state->words = state->memory.words();
  return state;
}

void add_streams(PoolState& state, int device, bool non_blocking, int priority, int partition = -1) {
  state.device = device;
  state.non_blocking = non_blocking;
  state.priority = priority;
  state.partition = partition;
  unsigned flags = non_blocking ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT;
  state.streams.reserve(state.size);
  // A failure part way leaves the created objects to their destructors, which destroy the streams.
  for (int i = 0; i < state.size; i++) state.streams.push_back(create_stream(device, flags, priority, partition));
}

// { handle, id, memory, streams, device, size, nonBlocking, priority, isDefault, owner } for one more handle.
// The caller counted the handle (count_handle) and copied `streams` under the registry mutex.
Napi::Value handle_description(Napi::Env env, std::shared_ptr<PoolState> counted, std::vector<std::shared_ptr<NativeStream>> streams) {
  // The handle owns the count from here on: when an N-API call below fails (a worker being terminated), its
  // destructor gives the count back, as its finalizer would have.
  auto handle = std::make_shared<PoolHandle>(std::move(counted), AddonData::of(env).environment_id);
  const std::shared_ptr<PoolState>& state = handle->state;
  Napi::Object out = Napi::Object::New(env);
  out.Set("id", state->id);
  out.Set("memory", state->memory.to_js(env));
  Napi::Array objects = Napi::Array::New(env, streams.size());
  for (size_t i = 0; i < streams.size(); i++) objects.Set(static_cast<uint32_t>(i), wrap_stream(env, streams[i]));
  out.Set("streams", objects);
  out.Set("device", state->device);
  out.Set("size", state->size);
  out.Set("nonBlocking", state->non_blocking);
  out.Set("priority", state->priority);
  out.Set("partition", state->partition);
  out.Set("isDefault", state->is_default);
  out.Set("owner", state->owner_environment);
  out.Set("handle", wrap_native(env, std::move(handle)));
  return out;
}

Napi::Value register_new(Napi::Env env, std::shared_ptr<PoolState> state) {
  std::vector<std::shared_ptr<NativeStream>> streams;
  {
    std::lock_guard<OrderedMutex> lock(registry().mutex);
    state->id = registry().next_id++;
    state->owner_environment = AddonData::of(env).environment_id;
    count_handle(*state, state->owner_environment, 1);
    registry().pools[state->id] = state;
    streams = state->streams;
  }
  return handle_description(env, std::move(state), std::move(streams));
}

// poolCreate(device, size, nonBlocking, priority, layout, partition) -> description: creates `size` streams (in the
// device's partition `partition`, or on the whole device for -1) and the words.
Napi::Value pool_create(const Napi::CallbackInfo& info) {
  int device = info[0].As<Napi::Number>().Int32Value();
  int size = info[1].As<Napi::Number>().Int32Value();
  bool non_blocking = info[2].As<Napi::Boolean>().Value();
  int priority = info[3].As<Napi::Number>().Int32Value();
  auto state = new_state(size, read_layout(info[4]));
  add_streams(*state, device, non_blocking, priority, info[5].As<Napi::Number>().Int32Value());
  return register_new(info.Env(), std::move(state));
}

// poolCreateShared(size, layout) -> description without streams: the shared words alone, so that the policy and
// the cross-thread machinery (attach, the cleanup hook) can be tested where there is no GPU.
Napi::Value pool_create_shared(const Napi::CallbackInfo& info) {
  int size = info[0].As<Napi::Number>().Int32Value();
  return register_new(info.Env(), new_state(size, read_layout(info[1])));
}

// poolDefault(device, size, nonBlocking, priority, layout) -> description of the device's process-wide pool,
// created by the first caller in any thread (with that caller's size); later callers get the same pool.
Napi::Value pool_default(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int device = info[0].As<Napi::Number>().Int32Value();
  std::shared_ptr<PoolState> state;
  std::vector<std::shared_ptr<NativeStream>> streams;
  {
    // Creation happens under the mutex so that two threads asking at once get one pool; it makes no call that
    // can block on another thread's GPU work.
    std::lock_guard<OrderedMutex> lock(registry().mutex);
    auto found = registry().defaults.find(device);
    if (found != registry().defaults.end()) {
      state = found->second;
    } else {
      state = new_state(info[1].As<Napi::Number>().Int32Value(), read_layout(info[4]));
      add_streams(*state, device, info[2].As<Napi::Boolean>().Value(), info[3].As<Napi::Number>().Int32Value());
      state->id = registry().next_id++;
      state->is_default = true;
      registry().defaults[device] = state;
      registry().pools[state->id] = state;
    }
    count_handle(*state, AddonData::of(info.Env()).environment_id, 1);
    streams = state->streams;
  }
  return handle_description(env, std::move(state), std::move(streams));
}

// poolAttach(id) -> description for one more handle in this thread; undefined for an id no pool ever had (one that
// is not an int is never truncated onto a real id); DestroyedError once the pool is gone.
Napi::Value pool_attach(const Napi::CallbackInfo& info) {
  double requested = info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : 0;
  if (!(requested >= 1 && requested <= INT_MAX) || requested != static_cast<int>(requested)) return info.Env().Undefined();
  int id = static_cast<int>(requested);
  std::shared_ptr<PoolState> state;
  std::vector<std::shared_ptr<NativeStream>> streams;
  {
    std::lock_guard<OrderedMutex> lock(registry().mutex);
    if (id >= registry().next_id) return info.Env().Undefined();
    auto found = registry().pools.find(id);
    if (found == registry().pools.end() || found->second->destroyed) throw Destroyed{"StreamPool", "attach"};
    state = found->second;
    count_handle(*state, AddonData::of(info.Env()).environment_id, 1);
    streams = state->streams;
  }
  return handle_description(info.Env(), std::move(state), std::move(streams));
}

// poolDestroy(handle): destroys the pool in every thread (state word, streams); a default pool is never
// destroyed (the TS layer only detaches from it). Idempotent.
Napi::Value pool_destroy(const Napi::CallbackInfo& info) {
  auto handle = unwrap_native<PoolHandle>(info[0]);
  if (!handle->state->is_default) destroy_pool(handle->state);
  return info.Env().Undefined();
}

// poolDetach(handle): gives this handle's count back now rather than at GC (Note [pool attachments]); the last one
// destroys a pool that is not a default pool. Idempotent.
Napi::Value pool_detach(const Napi::CallbackInfo& info) {
  unwrap_native<PoolHandle>(info[0])->release();
  return info.Env().Undefined();
}

// The thread-exit transition of Note [pool shared words] (pool/pool-words.ts): gives back what `environment` held in
// one pool. Its waiting-table entry goes first, then its lease words (held or handed to it), each after its budget:
// a hand-off racing with this either re-reads the entry after it was cleared and takes its word back, or wrote its
// word before the sweep below, which frees it. Then the memory turn and lock, if it held them (Note [memory
// admission] in pool/pool-policy.ts). Then bumps every wake counter; native code cannot Atomics.notify, so waiters in other threads
// notice on their backstop timer (Note [pool waiting] in pool/pool-policy.ts).
void release_exited_thread(PoolState& state, int environment) {
  const Layout& l = state.layout;
  int32_t* words = state.words;
  for (int k = 0; k < l.env_entries; k++) {
    int32_t* entry = &words[l.env_base + k * l.env_stride];
    if (load_word(entry) != environment) continue;
    store_word(entry + l.env_waiters, 0);  // before giving up the entry, so a new holder's count is never zeroed
    store_word(entry + l.env_memory_waiters, 0);
    if (swap_word(entry, environment, 0)) add_word(&words[l.waiting_envs], -1);
  }
  for (int i = 0; i < state.size; i++) {
    int32_t* lease = &words[l.lease_base + i];
    if (load_word(lease) == environment) {
      // Only the holder of a word writes its budget, and this holder's JS has stopped. A word handed to it (-e) has
      // none: the giver zeroed it first, and may take the word back and write a budget of its own meanwhile.
      __atomic_store_n(reinterpret_cast<int64_t*>(&words[l.budget_base + 2 * i]), int64_t{0}, __ATOMIC_SEQ_CST);
      swap_word(lease, environment, 0);
    } else {
      swap_word(lease, -environment, 0);
    }
  }
  swap_word(&words[l.memory_turn], environment, 0);
  swap_word(&words[l.memory_lock], environment, 0);
  for (int k = 0; k < l.env_entries; k++) add_word(&words[l.env_base + k * l.env_stride + l.env_wake_counter], 1);
}

// Gives back what a dying environment held in every pool.
// Runs on: the dying environment's thread, from its cleanup hook (main thread exit, worker exit or terminate).
// Its JS no longer runs; only shared words are touched, no CUDA call, no JS.
void release_environment(int environment) {
  std::vector<std::shared_ptr<PoolState>> pools;
  {
    std::lock_guard<OrderedMutex> lock(registry().mutex);
    for (auto& entry : registry().pools)
      if (!entry.second->destroyed) pools.push_back(entry.second);
  }
  for (auto& state : pools) release_exited_thread(*state, environment);
}

// poolThreadExit(handle, environment): the exit of `environment` from this pool, as its cleanup hook makes it;
// lets the CPU model test kill a simulated thread at any step.
Napi::Value pool_thread_exit(const Napi::CallbackInfo& info) {
  auto handle = unwrap_native<PoolHandle>(info[0]);
  int environment = info[1].As<Napi::Number>().Int32Value();
  release_exited_thread(*handle->state, environment);
  return info.Env().Undefined();
}

}  // namespace

// The exports of this file; test/cpu/contract.test.ts checks them against NativeBinding.
const Export kPoolExports[] = {
    {"poolCreate", "number, number, boolean, number, object, number", entry<pool_create>},
    {"poolCreateShared", "number, object", entry<pool_create_shared>},
    {"poolDefault", "number, number, boolean, number, object", entry<pool_default>},
    {"poolAttach", "number", entry<pool_attach>},
    {"poolDestroy", "ref", entry<pool_destroy>},
    {"poolDetach", "ref", entry<pool_detach>},
    {"poolThreadExit", "ref, number", entry<pool_thread_exit>},
};

void register_pool(Napi::Env env, Napi::Object exports) {
  export_all(env, exports, kPoolExports);
  int environment = AddonData::of(env).environment_id;
  // Cleanup hook: runs when this environment tears down (main thread exit, worker exit or terminate), after its JS
  // has stopped. Leases it still held go back, its waiting entry is freed. A harmless no-op at any stage: with no
  // pool, or a pool already destroyed, there is nothing to give back.
  env.AddCleanupHook([environment]() { never_throws("pool cleanup hook", [&] { release_environment(environment); }); });
}

}  // namespace csp
