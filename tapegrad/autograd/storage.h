#pragma once
// Storage: one contiguous, 64-byte aligned buffer shared by a tensor and its views.
//
// Buffers come from a caching pool keyed by size class (multiples of 64 bytes up to 4 KiB, then eight
// classes per power of two; the pool's byte counts are of the classes): a training step allocates the same
// shapes every step, so after the first step nearly every allocation is a pop from a free list
// instead of a malloc (and, for large buffers, an mmap plus page faults). Each thread keeps its
// own free lists, so allocating takes no lock. A buffer released on another thread than the one
// that allocated it goes to a shared list that every thread draws from when its own has none of
// that size, as do the lists of a thread that exits.

#include <cstddef>
#include <cstdint>
#include <memory>

namespace tapegrad {

class Storage {
 public:
  // An uninitialised buffer of nbytes bytes.
  explicit Storage(std::size_t nbytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }

  // Bumped by every in-place write through the public API, so the engine can tell that a
  // tensor saved for backward was modified after it was saved.
  std::uint64_t version() const { return version_; }
  void bump_version() { ++version_; }
  // For a storage that takes the place of `replaced` under a tensor (Module::to converting a
  // parameter to another dtype): continues replaced's count one write further, so the swap reads
  // as one more in-place write of the tensor.
  void continue_version_from(const Storage& replaced) { version_ = replaced.version_ + 1; }

 private:
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  std::uint64_t owner_ = 0;  // the allocating thread (storage.cpp)
  std::uint64_t version_ = 0;
};

// Statistics and control of the buffer pool, summed over threads.
struct PoolStats {
  std::size_t bytes_in_use = 0;       // held by live storages
  std::size_t bytes_cached = 0;       // free buffers kept for reuse
  std::size_t peak_bytes_in_use = 0;  // the sum of each thread's own peak (exact with one thread)
  std::size_t allocations = 0;        // buffers requested
  std::size_t pool_hits = 0;          // of those, served from the cache
};
PoolStats pool_stats();
// Starts the peak over: peak_bytes_in_use becomes the bytes in use now (to measure one phase).
void reset_peak_pool_stats();
// Returns the calling thread's cached buffers, and those of exited threads, to the system.
void empty_pool_cache();

}  // namespace tapegrad
