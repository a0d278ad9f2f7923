#include "tapegrad/autograd/storage.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "tapegrad/autograd/error.h"

namespace tapegrad {
namespace {

constexpr std::size_t kAlignment = 64;
// Free buffers a thread keeps beyond this many bytes go back to the system.
constexpr std::size_t kMaxCachedBytes = std::size_t{2} << 30;

// The size a buffer of n bytes takes, which is what the caches file it under: a multiple of 64 bytes
// up to 4 KiB, then one of eight sizes per power of two (at most 12.5% above n). Tensors whose sizes
// change from step to step (a batch's bags, sequences of varying length) then reuse each other's
// buffers; with exact sizes every new size missed and the freed ones piled up in the cache.
std::size_t round_up(std::size_t n) {
  n = std::max<std::size_t>(n, 1);
  if (n > (std::numeric_limits<std::size_t>::max() >> 2)) return n;  // no class; the allocation fails
  if (n <= 4096) return (n + kAlignment - 1) / kAlignment * kAlignment;
  const int top = 63 - __builtin_clzll(n);  // 2^top <= n < 2^(top + 1)
  const std::size_t step = std::size_t{1} << (top - 3);
  return (n + step - 1) / step * step;
}

// Counters one thread writes and any thread may read (relaxed atomics: a plain load and
// store on x86, no locked instruction on the allocation path).
struct Counters {
  std::atomic<std::int64_t> in_use{0};  // may go negative on a thread that frees others' buffers
  std::atomic<std::int64_t> peak{0};
  std::atomic<std::int64_t> cached{0};
  std::atomic<std::uint64_t> allocations{0};
  std::atomic<std::uint64_t> hits{0};

  static void bump(std::atomic<std::int64_t>& c, std::int64_t by) {
    c.store(c.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  }
  static void bump(std::atomic<std::uint64_t>& c) {
    c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
};

// Each thread caches its own free buffers, so allocating and releasing take no lock (a
// training step makes dozens of small tensors, and an uncontended mutex pair per buffer was a
// tenth of the spam toy's step). The shared part, under a mutex, only registers threads'
// counters and adopts the buffers of threads that exit.
struct Shared {
  std::mutex mutex;
  std::vector<Counters*> live;  // counters of running threads
  Counters retired;             // totals of threads that have exited (written under mutex)
  std::unordered_map<std::size_t, std::vector<void*>> orphans;  // free buffers of exited threads
};

Shared& shared() {
  // Never destroyed: storages held by static tensors may be released after other statics.
  static Shared* instance = new Shared();
  return *instance;
}

// Plain thread_local flag (no destructor), readable after the cache below is destroyed:
// storages released during thread or program teardown then go straight to the system.
thread_local bool cache_gone = false;

struct ThreadCache {
  std::unordered_map<std::size_t, std::vector<void*>> free;
  Counters counters;

  ThreadCache() {
    std::lock_guard<std::mutex> lock(shared().mutex);
    shared().live.push_back(&counters);
  }
  ~ThreadCache() {
    Shared& s = shared();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.live.erase(std::remove(s.live.begin(), s.live.end(), &counters), s.live.end());
    for (auto& [size, buffers] : free) {
      auto& list = s.orphans[size];
      list.insert(list.end(), buffers.begin(), buffers.end());
    }
    auto fold = [](auto& into, const auto& from) { into.store(into.load() + from.load()); };
    fold(s.retired.in_use, counters.in_use);
    fold(s.retired.peak, counters.peak);
    fold(s.retired.cached, counters.cached);
    fold(s.retired.allocations, counters.allocations);
    fold(s.retired.hits, counters.hits);
    cache_gone = true;
  }
};

ThreadCache* thread_cache() {
  if (cache_gone) return nullptr;
  thread_local ThreadCache cache;
  return &cache;
}

// A number for the calling thread that no other thread of the process has had.
std::uint64_t thread_serial() {
  static std::atomic<std::uint64_t> next{1};
  thread_local const std::uint64_t serial = next.fetch_add(1, std::memory_order_relaxed);
  return serial;
}

void* take_orphan(std::size_t size) {
  Shared& s = shared();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.orphans.find(size);
  if (it == s.orphans.end() || it->second.empty()) return nullptr;
  void* p = it->second.back();
  it->second.pop_back();
  s.retired.cached.store(s.retired.cached.load() - static_cast<std::int64_t>(size));
  return p;
}

void* allocate(std::size_t nbytes) {
  const std::size_t size = round_up(nbytes);
  ThreadCache* cache = thread_cache();
  if (cache) {
    Counters& c = cache->counters;
    Counters::bump(c.allocations);
    Counters::bump(c.in_use, static_cast<std::int64_t>(size));
    if (c.in_use.load(std::memory_order_relaxed) > c.peak.load(std::memory_order_relaxed))
      c.peak.store(c.in_use.load(std::memory_order_relaxed), std::memory_order_relaxed);
    auto it = cache->free.find(size);
    if (it != cache->free.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      Counters::bump(c.cached, -static_cast<std::int64_t>(size));
      Counters::bump(c.hits);
      return p;
    }
  }
  if (void* p = take_orphan(size)) {
    if (cache) Counters::bump(cache->counters.hits);
    return p;
  }
  void* p = std::aligned_alloc(kAlignment, size);
  if (!p) {
    if (cache) Counters::bump(cache->counters.in_use, -static_cast<std::int64_t>(size));
    throw Error(message("out of memory: cannot allocate a tensor buffer of ", nbytes, " bytes"));
  }
  return p;
}

// A buffer released on another thread than the one that allocated it goes to the shared lists,
// where any thread finds it on a miss: a thread that makes tensors another one frees (a batch
// loader, a worker computing a shard's gradients) gets its buffers back, instead of allocating
// afresh every step while the other thread's cache grows.
void give_away(void* p, std::size_t size) {
  Shared& s = shared();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (static_cast<std::size_t>(s.retired.cached.load()) + size > kMaxCachedBytes) {
    std::free(p);
    return;
  }
  s.orphans[size].push_back(p);
  s.retired.cached.store(s.retired.cached.load() + static_cast<std::int64_t>(size));
}

void release(void* p, std::size_t nbytes, std::uint64_t owner) {
  const std::size_t size = round_up(nbytes);
  ThreadCache* cache = thread_cache();
  if (!cache) {
    std::free(p);
    return;
  }
  Counters& c = cache->counters;
  Counters::bump(c.in_use, -static_cast<std::int64_t>(size));
  if (owner != thread_serial()) {
    give_away(p, size);
    return;
  }
  if (static_cast<std::size_t>(c.cached.load(std::memory_order_relaxed)) + size <= kMaxCachedBytes) {
    cache->free[size].push_back(p);
    Counters::bump(c.cached, static_cast<std::int64_t>(size));
    return;
  }
  std::free(p);
}

}  // namespace

Storage::Storage(std::size_t nbytes) : data_(allocate(nbytes)), nbytes_(nbytes), owner_(thread_serial()) {}

Storage::~Storage() { release(data_, nbytes_, owner_); }

PoolStats pool_stats() {
  thread_cache();  // registers this thread, so a fresh thread sees the totals too
  Shared& s = shared();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::int64_t in_use = s.retired.in_use.load(), peak = s.retired.peak.load(), cached = s.retired.cached.load();
  std::uint64_t allocations = s.retired.allocations.load(), hits = s.retired.hits.load();
  for (const Counters* c : s.live) {
    in_use += c->in_use.load(std::memory_order_relaxed);
    peak += c->peak.load(std::memory_order_relaxed);
    cached += c->cached.load(std::memory_order_relaxed);
    allocations += c->allocations.load(std::memory_order_relaxed);
    hits += c->hits.load(std::memory_order_relaxed);
  }
  PoolStats stats;
  stats.bytes_in_use = static_cast<std::size_t>(std::max<std::int64_t>(in_use, 0));
  stats.peak_bytes_in_use = static_cast<std::size_t>(std::max<std::int64_t>(peak, 0));
  stats.bytes_cached = static_cast<std::size_t>(std::max<std::int64_t>(cached, 0));
  stats.allocations = allocations;
  stats.pool_hits = hits;
  return stats;
}

void reset_peak_pool_stats() {
  thread_cache();
  Shared& s = shared();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.retired.peak.store(s.retired.in_use.load());
  for (Counters* c : s.live) c->peak.store(c->in_use.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

void empty_pool_cache() {
  if (ThreadCache* cache = thread_cache()) {
    for (auto& [size, buffers] : cache->free)
      for (void* p : buffers) std::free(p);
    cache->free.clear();
    cache->counters.cached.store(0, std::memory_order_relaxed);
  }
  Shared& s = shared();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto& [size, buffers] : s.orphans)
    for (void* p : buffers) std::free(p);
  s.orphans.clear();
  s.retired.cached.store(0);
}

}  // namespace tapegrad
