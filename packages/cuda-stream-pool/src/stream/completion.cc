// The completion engine's JS-facing part: each environment's channel, and the functions completion.ts calls. See
// Note [completion engine] in completion.h.
#include "stream/completion.h"

#include <cstdint>
#include <mutex>
#include <string>

#include <poll.h>
#include <sched.h>
#include <uv.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "binding/binding.h"
#include "internal/context.h"
#include "internal/device-faults.h"
#include "internal/landing.h"
#include "internal/loader.h"
#include "internal/markers.h"
#include "internal/never-throws.h"
#include "internal/poller.h"
#include "internal/submission.h"
#include "internal/tickets.h"
#include "stream/event.h"
#include "stream/stream.h"

namespace csp {

// Note [deliveries at loop turns]: a wake-up through the thread-safe function costs the JS thread a system call or
// two and a callback scope, and a busy JS thread (one that awaits many streams, say) needs none: its event loop turns
// anyway. So while an environment has waits pending, libuv handles watch its loop: a check handle, which runs
// as the loop leaves its poll phase (the thread is awake and will run callbacks), marks the channel `turning`; a
// prepare handle, which runs just before the loop may block in poll again, delivers what is ready (again, while
// settling waits makes more ready, a few rounds, after which an idle handle keeps the loop from blocking so that the
// next turn takes the rest) and clears the mark under the channel's mutex. The poller posts to
// the thread-safe function only when the channel is not marked, so a thread that blocks, or is about to, is woken
// as before, and a busy one takes its completions at its next turn, in one batch, without a wake-up
// (completionStats() counts both). Starting the watch (the first pending wait, made by JS code, so the loop turns
// before it blocks) marks the channel; stopping it clears the mark. The three handles are unref'd: the thread-safe
// function's ref keeps the loop alive while waits are pending. They are closed by an async cleanup hook at
// environment teardown. This is the addon's one use of libuv (the environment's loop, from
// napi_get_uv_event_loop), as internal/v8-memory.cc is its one use of V8's C++ API.
//
// Note [spin before blocking]: a thread that awaits one short piece of work at a time (launch, await, launch) blocks
// at every await, and each wake-up through the thread-safe function costs it about 10 us of latency and more CPU than
// a short spin. So the prepare handle, finding nothing ready, first spins (yielding the CPU between checks) for the
// poller to post a completion, up to the thread's spin budget; it does not spin, or stops, when its loop has anything
// else to do (a timer due or a pending handle, checked at every step; I/O ready on the loop's epoll descriptor, checked
// at the first step and every 8th): a completion that comes in time is delivered at once, as a turn batch, without a
// wake-up. It spins again after each delivery (whose continuations usually made the next wait), at most kTurnRounds
// times a turn. The budget adapts, as an adaptive mutex's does: kLongestSpin after a spin that saw its completion and
// after a block whose completion the poller posted within kLongestSpin of the start of the wait (its spin included),
// whatever the wake-up then took; halved after a spin that saw none (timed out, or left for other work) and after a
// block whose completion came later; below 1 us, no spin, except one wait in kProbeEvery, which spins kLongestSpin
// (spinning may itself bring the completion sooner: the CPU does not go idle). So a thread whose waits take longer
// than kLongestSpin stops spinning after a few, and one that other work interrupts spins less and less. No spin where
// the process may use only one CPU (its affinity, or a cgroup v2 quota below two CPUs at /sys/fs/cgroup/cpu.max).
// completionStats() counts spins and those that saw a completion. On by default (CUDA_STREAM_POOL_WAIT_SPIN=off turns it
// off): on an H100 host one await at a time took 10 us instead of 16.5, and in direct submission less of the JS
// thread's CPU (9 us, not 12).
//
// Note [tickets read at loop turns]: a wait on a stream's ticket (no other device's work behind it) is also offered to
// its environment's JS thread (a TicketWatch in the channel), which reads the ticket word itself wherever it looks for
// completions: at each round of the prepare handle, at each step of its spin, and when a wake-up drains the channel.
// So a thread that turns while its work finishes settles its waits without the poller's hand-off, and the poller,
// finding such a wait done later, posts nothing (no wake-up for a wait already settled). The two agree through the
// watch's `claimed` word, claimed once by whoever reports the wait; the JS thread that claims it also leaves the
// stream's entry that the wait held (a destroy() right after the await releases the handle at once, as after the
// poller's report), and the poller marks the word while it asks the driver about a late ticket through that entry, so
// that the entry is not left meanwhile (the JS thread tries again at its next look). The JS thread reports
// a wait only when nothing else could change its result: the word reached the marker's value, the stream is neither
// destroyed nor errored (a failure of a streamed copy found after its call returned is the poller's to report), and
// this environment has no copy into a JS array pending (those land first, through the poller's deliveries, as
// before). Whatever it does not take stays the poller's, exactly as before; completionStats().ticketsRead counts
// what it took. Each look reads every watch, so a thread watches at most kMostTicketWatches waits at a time (with
// 40,000 pending on one stream, reading them all at each look made each await elsewhere 19 times slower); waits
// beyond that are the poller's alone. What the poller had found done before a look is settled before what the look
// reads, so the look does not make a later wait on a stream overtake an earlier one that the poller reported.
constexpr std::chrono::microseconds kLongestSpin{40};
// With no budget left, one wait in this many spins all the same (kLongestSpin): does spinning pay again?
constexpr int kProbeEvery = 64;
// The most waits a thread reads the tickets of (Note [tickets read at loop turns]): each look reads them all, and the
// poller takes the rest as before.
constexpr size_t kMostTicketWatches = 256;

struct LoopTurns {
  uv_prepare_t prepare;
  std::chrono::nanoseconds spin_budget = kLongestSpin;  // Note [spin before blocking]
  std::chrono::steady_clock::time_point waiting_since{};  // when this round of the prepare began to wait (or spin)
  std::chrono::steady_clock::time_point blocked_at{};     // the waiting_since of the last block with waits; 0: none
  uint64_t posts_at_block = 0;                            // channel->posts then
  int blocks_without_spin = 0;                            // waits that did not spin, their budget gone (kProbeEvery)
  uv_check_t check;
  uv_idle_t idle;  // active while a prepare left completions ready: the loop then polls without blocking
  Channel* channel = nullptr;  // lives until the async cleanup hook, which closes these handles first
  napi_env env = nullptr;
  Napi::FunctionReference dispatch;
  std::unique_ptr<Napi::AsyncContext> context;
  napi_async_cleanup_hook_handle cleanup = nullptr;
  bool watching = false;
  int open_handles = 3;
};

// ------------------------------------------------------------------------------------------------------------------
// Per-environment delivery.

namespace {

Channel& channel_of(Napi::Env env) {
  AddonData& addon = AddonData::of(env);
  if (!addon.channel) throw Napi::Error::New(env, "cuda-stream-pool internal: completionInit was not called");
  return *addon.channel;
}

// Lands every landing of this environment whose marker is done; returns how many are still pending.
size_t flush_landings(Napi::Env env, Channel& channel) {
  size_t kept = 0;
  for (auto& landing : channel.landings) {
    if (!settle_landing(env, *landing)) channel.landings[kept++] = std::move(landing);
  }
  channel.landings.resize(kept);
  return kept;
}

// Settles `batch` on the JS thread of the channel's environment: lands copies first, answers probes, and hands the
// finished waits to JS in one call of `call(tokens, results)`. `woken`: the batch came through the thread-safe
// function (a wake-up), not at a loop turn. Never throws: an exception from JS is reported as uncaught.
template <class Call>
void deliver(Napi::Env env, Channel& channel, std::vector<Ready>& batch, bool woken, Call call) {
  try {
    Napi::HandleScope scope(env);
    flush_landings(env, channel);  // a copy lands before any later completion is reported
    Napi::Array tokens = Napi::Array::New(env);
    Napi::Array results = Napi::Array::New(env);
    uint32_t count = 0;
    for (Ready& item : batch) {
      if (item.probe) {
        const bool idle = make_current_quiet(item.probe->device) && drv().cuStreamQuery(CU_STREAM_PER_THREAD) == CUDA_SUCCESS;
        item.probe->state.store(idle ? LateProbe::kIdle : LateProbe::kBusy, std::memory_order_release);
        continue;
      }
      if (item.landing && item.part) {
        land_part(env, *item.landing);
        channel.part_landings++;
        continue;
      }
      if (item.landing) {
        finish_landing(env, *item.landing, item.result);
        continue;
      }
      tokens.Set(count, Napi::Number::New(env, item.token));
      if (item.failure)
        results.Set(count, js_error_of(env, item.failure));
      else
        results.Set(count, Napi::Number::New(env, wait_result(item.result, item.dependency)));
      count++;
    }
    if (woken)
      channel.wakeups++;
    else
      channel.turn_batches++;
    channel.delivered += count;
    if (count > channel.largest_batch) channel.largest_batch = count;
    if (count) call(tokens, results);
  } catch (const Napi::Error& error) {
    // The dispatcher never throws; if it did, report it as an uncaught exception rather than abort the process. In a
    // terminating worker every N-API call fails, Value() included: then there is nobody to report to.
    never_throws("completion delivery", [&] {
      napi_value value = error.Value();
      if (value) napi_fatal_exception(env, value);
    });
  } catch (...) {
  }
}

// Streams whose watches left the channel (TicketWatch): `leave`, the entry of a wait the JS thread settled.
struct LeftWatch {
  std::shared_ptr<NativeStream> stream;
  bool leave;
};

// Whether the watch's wait is done and this thread may report it (Note [tickets read at loop turns]).
bool ticket_reached(const TicketWatch& watch) {
  return marker_status(watch.marker) == CUDA_SUCCESS && watch.claimed->load(std::memory_order_acquire) == kUnclaimed &&
         !watch.stream->NativeObject::retired() && !watch.stream->owner().failure.set();
}

// Claims the watch's wait for this thread; false when the poller reports it, or is asking about its stream.
bool claim(const TicketWatch& watch) {
  int unclaimed = kUnclaimed;
  return watch.claimed->compare_exchange_strong(unclaimed, kClaimedByThread, std::memory_order_acq_rel);
}

// Moves the waits whose tickets this thread reads as done into `batch`, and drops the watches the poller reported.
// JS thread, under the channel's mutex; the caller then lets go of `left` (after the mutex: a leave may release a
// handle, a driver call).
void take_tickets_locked(Channel& channel, std::vector<Ready>& batch, std::vector<LeftWatch>& left) {
  if (channel.tickets.empty() || !channel.landings.empty()) return;
  size_t kept = 0;
  for (size_t i = 0; i < channel.tickets.size(); i++) {
    TicketWatch& watch = channel.tickets[i];
    const bool mine = ticket_reached(watch) && claim(watch);
    if (mine || watch.claimed->load(std::memory_order_relaxed) == kClaimedByPoller) {
      if (mine) {
        batch.push_back(Ready{watch.token, CUDA_SUCCESS});
        channel.tickets_read++;
      }
      left.push_back(LeftWatch{std::move(watch.stream), mine});
      continue;
    }
    if (kept != i) channel.tickets[kept] = std::move(watch);
    kept++;
  }
  channel.tickets.resize(kept);
}

// Whether a watch's ticket reads as done, for a spin to stop at. JS thread.
bool tickets_reached(Channel& channel) {
  std::lock_guard<OrderedMutex> lock(channel.mutex);
  if (!channel.landings.empty()) return false;
  for (const TicketWatch& watch : channel.tickets)
    if (ticket_reached(watch)) return true;
  return false;
}

void let_go(std::vector<LeftWatch>& left) {
  for (LeftWatch& watch : left)
    if (watch.leave) watch.stream->leave();
  left.clear();
}

// Runs on: the JS thread of the channel's environment, once per batch posted by the poller.
void drain(Napi::Env env, Napi::Function dispatch, Channel& channel) {
  std::vector<Ready> batch;
  std::vector<LeftWatch> left;
  {
    std::lock_guard<OrderedMutex> lock(channel.mutex);
    batch.swap(channel.ready);
    channel.posted = false;
    // This thread is awake now and reaches its loop's prepare phase before it blocks again.
    channel.turning = channel.turns && channel.turns->watching;
    if (env != nullptr) take_tickets_locked(channel, batch, left);
  }
  let_go(left);
  if (env == nullptr) return;
  deliver(env, channel, batch, true, [&](Napi::Array tokens, Napi::Array results) { dispatch.Call({tokens, results}); });
}

// Wakes the channel's JS thread to drain what is ready, unless a drain is queued already. Under the channel's mutex.
void wake_locked(Channel& channel) {
  if (channel.posted) return;
  Channel* target = &channel;
  if (channel.tsfn.NonBlockingCall([target](Napi::Env env, Napi::Function dispatch) { drain(env, dispatch, *target); }) ==
      napi_ok)
    channel.posted = true;
}

// The most rounds one prepare delivers before it lets the loop poll (without blocking, if more is ready): I/O and
// timers must not starve behind a stream of completions.
constexpr int kTurnRounds = 4;

void on_idle(uv_idle_t*) {}

void on_check(uv_check_t* handle) {
  auto* turns = static_cast<LoopTurns*>(handle->data);
  Channel& channel = *turns->channel;
  if (turns->blocked_at != std::chrono::steady_clock::time_point{}) {
    // Note [spin before blocking]: a completion posted soon after the wait began would have come within a spin.
    if (channel.posts.load(std::memory_order_acquire) != turns->posts_at_block) {
      const std::chrono::steady_clock::time_point posted(
          std::chrono::steady_clock::duration(channel.first_post_since_block.load(std::memory_order_relaxed)));
      const bool soon = posted - turns->blocked_at < kLongestSpin;
      turns->spin_budget = soon ? std::chrono::nanoseconds(kLongestSpin) : turns->spin_budget / 2;
    }
    turns->blocked_at = {};
  }
  std::lock_guard<OrderedMutex> lock(channel.mutex);
  channel.turning = true;
}

// Whether the loop has a timer due or a pending, idle or closing handle (uv_backend_timeout is 0: no system call),
// or, with `io`, I/O ready on its epoll descriptor (one poll() call).
bool loop_has_work(uv_loop_t* loop, bool io) {
  if (uv_backend_timeout(loop) == 0) return true;
  if (!io) return false;
  pollfd descriptor{uv_backend_fd(loop), POLLIN, 0};
  return poll(&descriptor, 1, 0) > 0;
}

// Whether the process may use more than one CPU: its affinity, and a cgroup v2 CPU quota ("<quota> <period>" or
// "max <period>" at the container's root).
bool several_cpus() {
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0 && CPU_COUNT(&cpus) < 2) return false;
  if (FILE* file = std::fopen("/sys/fs/cgroup/cpu.max", "r")) {
    char quota[32] = {0};
    double period = 0;
    const bool read = std::fscanf(file, "%31s %lf", quota, &period) == 2;
    std::fclose(file);
    if (read && std::strcmp(quota, "max") != 0 && period > 0 && std::strtod(quota, nullptr) / period < 2)
      return false;
  }
  return true;
}

// Whether this process may spin before blocking (Note [spin before blocking]).
bool spinning_allowed() {
  static const bool allowed = [] {
    const char* setting = std::getenv("CUDA_STREAM_POOL_WAIT_SPIN");
    return !(setting && std::strcmp(setting, "off") == 0) && several_cpus();
  }();
  return allowed;
}

// Spins for up to the thread's budget, while its loop has nothing else to do, for the poller to post a completion;
// returns at once when one is ready. Only where spinning_allowed(). Note [spin before blocking].
void spin_for_completion(LoopTurns& turns) {
  std::chrono::nanoseconds budget = turns.spin_budget;
  if (budget < std::chrono::microseconds(1)) {
    // A probe now and then: spinning may itself make the completion come sooner (the CPU stays awake).
    if (++turns.blocks_without_spin % kProbeEvery != 0) return;
    budget = kLongestSpin;
  }
  Channel& channel = *turns.channel;
  uint64_t posts;
  {
    std::lock_guard<OrderedMutex> lock(channel.mutex);
    if (!channel.ready.empty()) return;
    posts = channel.posts.load(std::memory_order_relaxed);
  }
  uv_loop_t* loop = turns.prepare.loop;
  if (loop_has_work(loop, true)) return;
  channel.spins++;
  const auto until = turns.waiting_since + budget;
  for (int step = 1;; step++) {
    std::this_thread::yield();
    // Past the budget nothing counts as seen by the spin (a thread held off its CPU finds the work done late).
    const bool late = std::chrono::steady_clock::now() >= until;
    if (!late && (channel.posts.load(std::memory_order_acquire) != posts || tickets_reached(channel))) {
      channel.spins_completed++;
      turns.spin_budget = kLongestSpin;
      return;
    }
    if (late || loop_has_work(loop, step % 8 == 0)) {
      turns.spin_budget = budget / 2;
      return;
    }
  }
}

void on_prepare(uv_prepare_t* handle) {
  auto* turns = static_cast<LoopTurns*>(handle->data);
  Channel& channel = *turns->channel;
  uv_idle_stop(&turns->idle);
  // The loop calls this outside any handle scope, and delivery (its error path included) needs one. None can be
  // opened once the environment is ending: what is ready then stays for the cleanup hook.
  struct Scope {
    napi_env env;
    napi_handle_scope scope = nullptr;
    ~Scope() {
      if (scope) napi_close_handle_scope(env, scope);
    }
  } outer{turns->env};
  if (napi_open_handle_scope(turns->env, &outer.scope) != napi_ok) {
    std::lock_guard<OrderedMutex> lock(channel.mutex);
    channel.turning = false;
    return;
  }
  // With the spin off (CUDA_STREAM_POOL_WAIT_SPIN=off, or one CPU) the turn reads no clock and keeps no record of its
  // blocks.
  const bool spinning = spinning_allowed();
  for (int round = 0;; round++) {
    std::vector<Ready> batch;
    std::vector<LeftWatch> left;
    if (spinning) {
      turns->waiting_since = std::chrono::steady_clock::now();
      // Also after a delivery: its continuations usually made the next wait.
      if (round < kTurnRounds && turns->watching) spin_for_completion(*turns);
    }
    {
      std::lock_guard<OrderedMutex> lock(channel.mutex);
      const bool look = round < kTurnRounds && turns->watching;
      if (look) {
        // What the poller found done first, then what this look reads (a later wait on a stream does not overtake).
        batch.swap(channel.ready);
        take_tickets_locked(channel, batch, left);
      }
      if (batch.empty()) {
        if (round == kTurnRounds && turns->watching && !channel.ready.empty()) {
          uv_idle_start(&turns->idle, on_idle);  // the loop polls without blocking; the next turn takes the rest
          return;
        }
        // Blocking next: from here on the poller wakes the thread. What is still ready gets a wake-up now.
        channel.turning = false;
        if (spinning && channel.ready.empty() && turns->watching) {
          turns->blocked_at = turns->waiting_since;
          turns->posts_at_block = channel.posts.load(std::memory_order_relaxed);
        }
        if (!channel.ready.empty() && channel.open.load(std::memory_order_relaxed)) wake_locked(channel);
        return;
      }
    }
    let_go(left);
    Napi::Env env(turns->env);
    deliver(env, channel, batch, false, [&](Napi::Array tokens, Napi::Array results) {
      turns->dispatch.MakeCallback(env.Global(), {tokens, results}, *turns->context);
    });
  }
}

// Starts or stops watching the loop's turns, with the waits pending (completionRef, completionUnref).
void watch_turns(Channel& channel, bool on) {
  LoopTurns* turns = channel.turns;
  if (!turns || turns->watching == on) return;
  turns->watching = on;
  {
    std::lock_guard<OrderedMutex> lock(channel.mutex);
    channel.turning = on;
  }
  if (on) {
    uv_prepare_start(&turns->prepare, on_prepare);
    uv_check_start(&turns->check, on_check);
  } else {
    uv_prepare_stop(&turns->prepare);
    uv_check_stop(&turns->check);
    uv_idle_stop(&turns->idle);
    turns->blocked_at = {};  // no block to learn from once the watch starts again
  }
}

void turn_handle_closed(uv_handle_t* handle) {
  auto* turns = static_cast<LoopTurns*>(handle->data);
  if (--turns->open_handles > 0) return;
  if (turns->cleanup) napi_remove_async_cleanup_hook(turns->cleanup);
  delete turns;
}

// Environment teardown: the channel no longer counts on turns; the handles close, and the hook ends when all have.
void close_turns(napi_async_cleanup_hook_handle, void* data) {
  auto* turns = static_cast<LoopTurns*>(data);
  watch_turns(*turns->channel, false);
  turns->channel->turns = nullptr;
  turns->dispatch.Reset();
  turns->context.reset();
  uv_close(reinterpret_cast<uv_handle_t*>(&turns->prepare), turn_handle_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&turns->check), turn_handle_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&turns->idle), turn_handle_closed);
}

// The loop-turn watch of a new channel, or null (every batch then wakes the thread) when the loop is out of reach.
LoopTurns* make_turns(Napi::Env env, Channel& channel, Napi::Function dispatch) {
  uv_loop_t* loop = nullptr;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok || !loop) return nullptr;
  auto* turns = new LoopTurns();
  turns->channel = &channel;
  turns->env = env;
  // These inits never fail: they only link the handle into the loop.
  uv_prepare_init(loop, &turns->prepare);
  uv_check_init(loop, &turns->check);
  uv_idle_init(loop, &turns->idle);
  turns->prepare.data = turns;
  turns->check.data = turns;
  turns->idle.data = turns;
  uv_unref(reinterpret_cast<uv_handle_t*>(&turns->prepare));
  uv_unref(reinterpret_cast<uv_handle_t*>(&turns->check));
  uv_unref(reinterpret_cast<uv_handle_t*>(&turns->idle));
  turns->dispatch = Napi::Persistent(dispatch);
  turns->context = std::make_unique<Napi::AsyncContext>(env, "cuda_stream_pool.completion");
  if (napi_add_async_cleanup_hook(env, close_turns, turns, &turns->cleanup) != napi_ok) {
    close_turns(nullptr, turns);  // deleted once its three handles closed
    return nullptr;
  }
  return turns;
}

}  // namespace

// Hands `item` to the channel's JS thread; false when its environment is closed.
bool post(Channel& channel, Ready item) {
  std::lock_guard<OrderedMutex> lock(channel.mutex);
  if (!channel.open.load(std::memory_order_relaxed)) return false;
  channel.ready.push_back(std::move(item));
  if (spinning_allowed()) {  // what the spin watches and learns from (Note [spin before blocking])
    if (!channel.turning && channel.ready.size() == 1) {
      const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
      channel.first_post_since_block.store(now, std::memory_order_relaxed);
    }
    channel.posts.fetch_add(1, std::memory_order_release);
  }
  if (!channel.turning) wake_locked(channel);
  return true;
}

namespace {

Wait* new_wait(std::shared_ptr<Channel> channel, double token, int device) {
  auto* wait = new Wait();
  wait->channel = std::move(channel);
  wait->token = token;
  wait->device = device;
  return wait;
}

// completionInit(dispatch: (tokens: number[], results: number[]) => void): this environment's channel, unref'd.
Napi::Value completion_init(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  AddonData& addon = AddonData::of(env);
  auto channel = std::make_shared<Channel>();
  channel->tsfn = Napi::ThreadSafeFunction::New(env, info[0].As<Napi::Function>(), "cuda_stream_pool.completion",
                                                0, 1);
  channel->tsfn.Unref(env);
  channel->turns = make_turns(env, *channel, info[0].As<Napi::Function>());
  addon.channel = channel;
  // Cleanup hook: runs at environment teardown (main thread exit, worker exit or termination), before the
  // thread-safe function's own cleanup. Waits still pending find the channel closed and are dropped by the poller;
  // landings already delivered but not drained give their staging back here. Harmless at any stage, including when
  // nothing is pending; never throws.
  env.AddCleanupHook([channel]() { never_throws("completion channel cleanup hook", [&] {
    std::vector<Ready> dropped;
    std::vector<TicketWatch> watches;  // the poller reports (drops) their waits
    {
      std::lock_guard<OrderedMutex> lock(channel->mutex);
      if (!channel->open.exchange(false)) return;
      channel->tsfn.Release();
      dropped.swap(channel->ready);
      watches.swap(channel->tickets);
    }
    for (Ready& item : dropped)  // a part landing's copy is not done: its staging goes back when the poller sees it done
      if (item.landing && !item.part) drop_landing(*item.landing, item.result);
  }); });
  return env.Undefined();
}

Napi::Value completion_ref(const Napi::CallbackInfo& info) {
  Channel& channel = channel_of(info.Env());
  channel.tsfn.Ref(info.Env());
  watch_turns(channel, true);
  return info.Env().Undefined();
}

Napi::Value completion_unref(const Napi::CallbackInfo& info) {
  Channel& channel = channel_of(info.Env());
  channel.tsfn.Unref(info.Env());
  watch_turns(channel, false);
  // No wait of this thread is pending: what the watches name is the poller's (an aborted wait's) or reported.
  std::vector<TicketWatch> watches;
  {
    std::lock_guard<OrderedMutex> lock(channel.mutex);
    watches.swap(channel.tickets);
  }
  return info.Env().Undefined();
}

// Queues a wait marker on `stream` and has the poller report `token` to this environment once the work queued so far
// is done. The caller holds the stream's use and made its context current.
void watch_stream_on(std::shared_ptr<Channel> channel, std::shared_ptr<NativeStream> stream, double token);

void watch_stream(Napi::Env env, std::shared_ptr<NativeStream> stream, double token) {
  channel_of(env);  // throws unless completionInit ran: a wait without a channel would never be reported
  watch_stream_on(AddonData::of(env).channel, std::move(stream), token);
}

// As watch_stream, for `channel`'s environment, from any thread (the submission thread).
void watch_stream_on(std::shared_ptr<Channel> channel, std::shared_ptr<NativeStream> stream, double token) {
  // Taken before the marker: what was recorded by then is queued before it (Note [cross-device dependencies]).
  const DependencySnapshot dependencies = stream->owner().dependencies.snapshot();
  Marker marker = enqueue_marker(*stream, MarkerUse::kWait);
  Wait* wait = new_wait(channel, token, stream->device);
  wait->marker = marker;
  wait->dependencies = dependencies;
  hold_stream(*wait, stream);
  // The environment's JS thread may read this ticket itself (Note [tickets read at loop turns]), once the poller has
  // the wait: a wait it could not take gave its entry back already.
  std::shared_ptr<std::atomic<int>> claimed;
  if (marker.word && !dependencies.devices && wait->holds_stream) {
    std::lock_guard<OrderedMutex> lock(channel->mutex);
    if (channel->open.load(std::memory_order_relaxed) && channel->tickets.size() < kMostTicketWatches) {
      claimed = std::make_shared<std::atomic<int>>(kNotClaimable);
      wait->claimed = claimed;
      channel->tickets.push_back(TicketWatch{token, marker, std::move(stream), claimed});
    }
  }
  try {
    submit_wait(wait);
  } catch (...) {
    if (claimed) claimed->store(kClaimedByPoller, std::memory_order_release);  // the watch goes at the next look
    throw;
  }
  int not_yet = kNotClaimable;
  if (claimed) claimed->compare_exchange_strong(not_yet, kUnclaimed, std::memory_order_acq_rel);
}

// streamNotify(streamRef, token): dispatch reports `token` once the work queued on the stream so far is done.
Napi::Value stream_notify(const Napi::CallbackInfo& info) {
  auto stream = unwrap_native<NativeStream>(info[0]);
  Use<NativeStream> use(*stream, "Stream", "synchronize", QueuesNoWork{});
  make_current(stream->device);
  watch_stream(info.Env(), std::move(stream), info[1].As<Napi::Number>().DoubleValue());
  return info.Env().Undefined();
}

// streamWait(streamRef, token) -> 0: the stream's work is done, nothing registered; CUDA_ERROR_NOT_READY: a marker is
// queued and dispatch reports `token` once the work is done; -1 or -2: the stream is capturing (active, invalidated),
// nothing queued; another CUresult (or a wait_result for a fault of a device its work waited on): the work failed.
// One call for the whole start of `await stream.synchronize()`.
Napi::Value stream_wait(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto stream = unwrap_native<NativeStream>(info[0]);
  const double token = info[1].As<Napi::Number>().DoubleValue();
  Use<NativeStream> use(*stream, "Stream", "synchronize", QueuesNoWork{});
  Submitter* submitter = nullptr;
  if (deferred_mode() && stream->unissued())
    submitter = recording_for(env, *stream);
  if (submitter) {
    // Work recorded on the stream is not issued yet: the marker follows this thread's in the queue.
    channel_of(env);  // throws unless completionInit ran
    std::shared_ptr<Channel> shared = AddonData::of(env).channel;
    record_operation(*submitter, Held<NativeStream>(stream, use, false),
                     [channel = std::move(shared), token](const FailurePointer& failure, const Held<NativeStream>& s) {
                       if (failure) {
                         // This wait reports the failure; the stream's next operation runs again.
                         s->owner().failure.report();
                         post(*channel, Ready{token, failure->code, nullptr, nullptr, -1, std::make_exception_ptr(CudaFailure(*failure))});
                         return true;
                       }
                       // A marker that cannot be queued fails its wait with what stopped it, as a direct wait would:
                       // a sticky fault as the wait's own failure, anything else naming the call that failed.
                       try {
                         make_current(s->device);
                         watch_stream_on(channel, s.pointer(), token);
                       } catch (const CudaFailure& failure) {
                         post(*channel, is_sticky(failure.code)
                                            ? Ready{token, failure.code}
                                            : Ready{token, failure.code, nullptr, nullptr, -1, std::current_exception()});
                       } catch (...) {
                         post(*channel, Ready{token, CUDA_ERROR_UNKNOWN, nullptr, nullptr, -1, std::current_exception()});
                       }
                       return true;
                     },
                     true);
    return Napi::Number::New(env, CUDA_ERROR_NOT_READY);
  }
  throw_stream_failure(*stream);
  if (const int capturing = capture_status(*stream)) return Napi::Number::New(env, -capturing);
  const DependencySnapshot dependencies = stream->owner().dependencies.snapshot();
  const CUresult status = query_stream(*stream);
  if (status == CUDA_SUCCESS && dependencies.devices) {
    const DependencyFault fault = settle_dependencies(stream->owner().dependencies, dependencies, stream->device);
    make_current_quiet(stream->device);
    return Napi::Number::New(env, wait_result(fault));
  }
  if (status != CUDA_ERROR_NOT_READY) return Napi::Number::New(env, status);
  // The query may have answered from the ticket without touching the driver; a new marker needs the context.
  make_current(stream->device);
  try {
    watch_stream(env, std::move(stream), token);
  } catch (const CudaFailure& failure) {
    // A sticky fault that came after the query is the wait's failure too, not that of the call that met it.
    if (is_sticky(failure.code)) return Napi::Number::New(env, failure.code);
    throw;
  }
  return Napi::Number::New(env, CUDA_ERROR_NOT_READY);
}

// streamLastTicket(streamRef) -> { address: bigint, value } | null: the host address of the stream's ticket word and
// the value its last marker writes there; null without a ticket. For the benchmark's observer of wake latency, which
// spins on the same word as the poller.
Napi::Value stream_last_ticket(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto stream = unwrap_native<NativeStream>(info[0]);
  std::lock_guard<OrderedMutex> lock(stream->marker_mutex);
  if (!stream->ticket) return env.Null();
  Napi::Object out = Napi::Object::New(env);
  out.Set("address", Napi::BigInt::New(env, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(stream->ticket->word))));
  out.Set("value", static_cast<double>(stream->ticket->issued));
  return out;
}

// Calls `each` with the environment's landings not finished that `done(landing)` says are in staging.
template <class Done, class Each>
void landings_done(Napi::Env env, Done done, Each each) {
  AddonData& addon = AddonData::of(env);
  if (!addon.channel) return;
  for (const auto& landing : addon.channel->landings)
    if (!landing->finished.load(std::memory_order_acquire) && done(*landing)) each(landing);
}

void mark_idle(const std::shared_ptr<Landing>& landing) { landing->stream_idle.store(true, std::memory_order_release); }

// Whether the landing's copy is ahead of the record that `cover` stands for, on its stream.
bool behind_record(const Landing& landing, const RecordCover& cover) {
  return landing.stream_serial == cover.stream && landing.position <= cover.landings;
}

// eventNotify(eventRef, token): dispatch reports `token` once the event's recorded work is done.
Napi::Value event_notify(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  channel_of(env);
  auto event = unwrap_native<NativeEvent>(info[0]);
  const double token = info[1].As<Napi::Number>().DoubleValue();
  if (!event->enter()) throw Destroyed{"Event", "synchronize"};  // left by the poller when the wait ends
  Wait* wait = new_wait(AddonData::of(env).channel, token, event->device);
  // The poller tells these copies once it finds the event done, if this record is still the last; in deferred mode only
  // once the record is issued (eventStatus, just before, waited for the records made until then) and not dropped.
  const RecordCover cover = event->read_cover();
  if (cover.landings && (!deferred_mode() || (event->records_issued.load(std::memory_order_acquire) >= cover.recorded &&
                                              !event->failure.set()))) {
    wait->cover_recorded = cover.recorded;
    wait->cover_direct = cover.direct;
    landings_done(env, [&](const Landing& landing) { return behind_record(landing, cover); },
                  [&](const std::shared_ptr<Landing>& landing) { wait->covered.push_back(landing); });
  }
  wait->dependencies = event->dependencies.snapshot();
  wait->event = std::move(event);
  submit_wait(wait);
  return env.Undefined();
}

// completionFlush() -> landings of this environment still pending, after landing every one that is ready.
Napi::Value completion_flush(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Napi::Number::New(env, static_cast<double>(flush_landings(env, channel_of(env))));
}

// completionStats() -> the engine's diagnostic counters (see CompletionStats in stream/completion.ts).
Napi::Value completion_stats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Channel& channel = channel_of(env);
  Napi::Object out = Napi::Object::New(env);
  out.Set("wakeups", channel.wakeups);
  out.Set("turnBatches", channel.turn_batches);
  out.Set("spins", channel.spins);
  out.Set("spinsCompleted", channel.spins_completed);
  out.Set("ticketsRead", channel.tickets_read);
  out.Set("delivered", channel.delivered);
  out.Set("largestBatch", channel.largest_batch);
  out.Set("landingsPending", static_cast<double>(channel.landings.size()));
  out.Set("partLandings", channel.part_landings);
  out.Set("longestLandingNs", longest_landing_ns());
  out.Set("processPending", poller_pending());
  out.Set("pollerParks", poller_parks());
  out.Set("lostTickets", poller_lost_tickets());
  out.Set("pollerParked", poller_parked());
  out.Set("markersEnqueued", static_cast<double>(g_markers_enqueued.load(std::memory_order_relaxed)));
  return out;
}

// completionMarker(device) -> 'ticket' | 'event': the marker kind the device's waits use.
Napi::Value completion_marker(const Napi::CallbackInfo& info) {
  const int device = info[0].As<Napi::Number>().Int32Value();
  make_current(device);
  return Napi::String::New(info.Env(), marker_kind(device) == MarkerKind::kTicket ? "ticket" : "event");
}

// completionSetMarker(device, 'ticket' | 'event'): the marker kind for later waits on the device (the micro-benchmark
// measures both in one process). Tickets only where the device supports them; returns the kind now in force.
Napi::Value completion_set_marker(const Napi::CallbackInfo& info) {
  const int device = info[0].As<Napi::Number>().Int32Value();
  make_current(device);
  g_marker_kind[device].store(MarkerKind::kUnknown, std::memory_order_relaxed);
  const bool event = info[1].As<Napi::String>().Utf8Value() == "event";
  MarkerKind kind = event ? MarkerKind::kEvent : marker_kind(device);
  if (event) g_marker_kind[device].store(kind, std::memory_order_relaxed);
  return Napi::String::New(info.Env(), kind == MarkerKind::kTicket ? "ticket" : "event");
}

}  // namespace

void track_landing(Napi::Env env, std::shared_ptr<Landing> landing, std::shared_ptr<NativeStream> stream) {
  Channel& channel = channel_of(env);
  Wait* wait = new_wait(AddonData::of(env).channel, 0, landing->marker.device);
  wait->marker = landing->marker;
  // Taken after the marker, so the poller asks these devices but never clears them (Note [cross-device
  // dependencies]): the stream's own waits do.
  wait->dependencies = stream->owner().dependencies.snapshot();
  landing->dependency_devices = wait->dependencies.devices;
  for (const auto& earlier : channel.landings)
    if (!earlier->finished.load(std::memory_order_acquire) && overlaps(*earlier, *landing)) landing->before.push_back(earlier);
  landing->stream = stream;
  landing->stream_serial = stream->owner().serial;
  landing->position = stream->owner().landings_queued.fetch_add(1, std::memory_order_acq_rel) + 1;  // queued now
  hold_stream(*wait, std::move(stream));
  wait->poll = landing->poll;
  wait->landing = landing;
  // Submitted first: a landing the poller never watches is not kept (no drain can run before the push, on this
  // thread).
  submit_wait(wait);
  channel.landings.push_back(std::move(landing));
}

void note_stream_idle(Napi::Env env, NativeStream& stream) {
  const uint64_t serial = stream.owner().serial;
  landings_done(env, [&](const Landing& landing) { return landing.stream_serial == serial; }, mark_idle);
}

void note_device_idle(Napi::Env env, int device) {
  landings_done(
      env,
      [&](const Landing& landing) {
        std::shared_ptr<NativeStream> on = landing.stream.lock();
        return on && on->device == device;
      },
      mark_idle);
}

void note_event_done(Napi::Env env, const NativeEvent& event, const RecordCover& cover) {
  if (cover.landings == 0 || !event.cover_current(cover.recorded, cover.direct)) return;
  landings_done(env, [&](const Landing& landing) { return behind_record(landing, cover); }, mark_idle);
}

// The exports of this file; test/cpu/contract.test.ts checks them against NativeBinding.
const Export kCompletionExports[] = {
    {"completionInit", "function", entry<completion_init>},
    {"completionRef", "", unordered<completion_ref>},
    {"completionUnref", "", unordered<completion_unref>},
    {"completionFlush", "", unordered<completion_flush>},
    {"completionStats", "", unordered<completion_stats>},
    {"completionMarker", "number", entry<completion_marker>},
    {"completionSetMarker", "number, string", entry<completion_set_marker>},
    {"streamLastTicket", "ref", entry<stream_last_ticket>},
    {"streamWait", "ref, number", unordered<stream_wait>},
    {"streamNotify", "ref, number", entry<stream_notify>},
    {"eventNotify", "ref, number", entry<event_notify>},
};

void register_completion(Napi::Env env, Napi::Object exports) {
  export_all(env, exports, kCompletionExports);
}

}  // namespace csp
