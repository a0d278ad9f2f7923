#include "autograd/storage.h"

#include <algorithm>
#include <string>

#include "autograd/error.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace tapegrad {
namespace {

constexpr std::size_t kAlignment = 64;
// Cached free buffers beyond this many bytes go back to the system.
constexpr std::size_t kMaxCachedBytes = std::size_t{2} << 30;

class BufferPool {
 public:
  void* allocate(std::size_t nbytes) {
    const std::size_t size = round_up(nbytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.allocations;
      stats_.bytes_in_use += size;
      if (stats_.bytes_in_use > stats_.peak_bytes_in_use) stats_.peak_bytes_in_use = stats_.bytes_in_use;
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        stats_.bytes_cached -= size;
        ++stats_.pool_hits;
        return p;
      }
    }
    void* p = std::aligned_alloc(kAlignment, size);
    if (!p) {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.bytes_in_use -= size;
      throw Error("out of memory: cannot allocate a tensor buffer of " + std::to_string(nbytes) + " bytes");
    }
    return p;
  }

  void release(void* p, std::size_t nbytes) {
    const std::size_t size = round_up(nbytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.bytes_in_use -= size;
      if (stats_.bytes_cached + size <= kMaxCachedBytes) {
        free_[size].push_back(p);
        stats_.bytes_cached += size;
        return;
      }
    }
    std::free(p);
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, buffers] : free_)
      for (void* p : buffers) std::free(p);
    free_.clear();
    stats_.bytes_cached = 0;
  }

  PoolStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  ~BufferPool() { empty_cache(); }

 private:
  static std::size_t round_up(std::size_t n) { return (std::max<std::size_t>(n, 1) + kAlignment - 1) / kAlignment * kAlignment; }

  std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;
  PoolStats stats_;
};

BufferPool& pool() {
  // Never destroyed: storages held by static tensors may be released after other statics.
  static BufferPool* instance = new BufferPool();
  return *instance;
}

}  // namespace

Storage::Storage(std::size_t nbytes) : data_(pool().allocate(nbytes)), nbytes_(nbytes) {}

Storage::~Storage() { pool().release(data_, nbytes_); }

PoolStats pool_stats() { return pool().stats(); }

void empty_pool_cache() { pool().empty_cache(); }

}  // namespace tapegrad
