#pragma once
// BlockAllocator: an allocator for std::allocate_shared that keeps freed blocks of one size in
// a per-thread free list. Every op makes a few shared objects (the output's TensorImpl, its
// Storage, the tape's Node) and a step frees them all again; glibc keeps only seven blocks per
// size in its thread cache, so most of them went through its slower bins. Internal to the
// library: the public headers do not include this one.
//
//   auto impl = std::allocate_shared<TensorImpl>(BlockAllocator<TensorImpl>());
//
// Under AddressSanitizer the lists are off (plain operator new and delete), so it still sees
// every use after free.

#include <cstddef>
#include <new>

namespace tapegrad::detail {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kBlockPoolEnabled = false;
#else
constexpr bool kBlockPoolEnabled = true;
#endif

// One thread's free list of Size-byte blocks. Plain data (no destructor), so a block freed
// while the thread tears down still finds it; `Reaper` returns the blocks when the thread ends.
template <std::size_t Size>
struct BlockList {
  static constexpr std::size_t kMaxBlocks = 8192;
  struct Free {
    Free* next;
  };
  Free* head = nullptr;
  std::size_t count = 0;
  bool reaper_armed = false;
  bool gone = false;  // the thread is ending: no more caching

  static BlockList& get() {
    static thread_local BlockList list;
    return list;
  }
  struct Reaper {
    ~Reaper() {
      BlockList& list = get();
      list.gone = true;
      while (list.head) {
        Free* next = list.head->next;
        ::operator delete(list.head);
        list.head = next;
      }
      list.count = 0;
    }
  };
};

template <std::size_t Size>
void* allocate_block() {
  if constexpr (kBlockPoolEnabled) {
    BlockList<Size>& list = BlockList<Size>::get();
    if (list.head) {
      auto* block = list.head;
      list.head = block->next;
      --list.count;
      return block;
    }
  }
  return ::operator new(Size);
}

template <std::size_t Size>
void free_block(void* p) {
  if constexpr (kBlockPoolEnabled) {
    BlockList<Size>& list = BlockList<Size>::get();
    if (!list.reaper_armed && !list.gone) {
      list.reaper_armed = true;
      static thread_local typename BlockList<Size>::Reaper reaper;
      (void)reaper;
    }
    if (!list.gone && list.count < BlockList<Size>::kMaxBlocks) {
      auto* block = static_cast<typename BlockList<Size>::Free*>(p);
      block->next = list.head;
      list.head = block;
      ++list.count;
      return;
    }
  }
  ::operator delete(p);
}

template <class T>
struct BlockAllocator {
  using value_type = T;
  // Sizes rounded up to 16 bytes, so types of similar size share a list.
  static constexpr std::size_t kBlock = (sizeof(T) + 15) / 16 * 16;
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "BlockAllocator: over-aligned type");

  BlockAllocator() = default;
  template <class U>
  BlockAllocator(const BlockAllocator<U>&) {}  // NOLINT: allocators convert implicitly

  T* allocate(std::size_t n) {
    if (n == 1) return static_cast<T*>(allocate_block<kBlock>());
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) {
    if (n == 1) free_block<kBlock>(p);
    else ::operator delete(p);
  }
  template <class U>
  bool operator==(const BlockAllocator<U>&) const {
    return true;
  }
  template <class U>
  bool operator!=(const BlockAllocator<U>&) const {
    return false;
  }
};

}  // namespace tapegrad::detail
