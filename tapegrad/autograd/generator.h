#pragma once
// Generator: a seeded source of random numbers. Every random op (rand, randn, uniform, dropout,
// initialisers) takes one, so a run is reproducible from its seed and the generator's state can be
// saved and restored with a checkpoint. Module constructors draw from default_generator() unless
// their options name another (.generator(&gen)); manual_seed(n) reseeds the default, as
// torch.manual_seed does:
//
//   tapegrad::manual_seed(0);
//   nn::Linear a(4, 2);              // draws from default_generator()
//   tapegrad::manual_seed(0);
//   nn::Linear b(4, 2);              // the same weights as a
//   Generator gen(7);
//   nn::Linear c{nn::LinearOptions(4, 2).generator(&gen)};  // draws from gen only

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tapegrad {

namespace detail {

// The 64-bit Mersenne Twister, MT19937-64 with the parameters of std::mt19937_64: the same numbers
// as the standard library's engine from the same seed, and the text form of its state that
// libstdc++ (GCC's library, the one tapegrad builds with) writes for it. Written
// here so that this header, which every tapegrad program includes, does not pull in <random> (a
// fifth of the time a training script takes to compile).
class Mt19937_64 {
 public:
  static constexpr int kWords = 312;

  explicit Mt19937_64(std::uint64_t value) { seed(value); }
  void seed(std::uint64_t value);
  std::uint64_t operator()() {
    if (position_ >= kWords) twist();
    std::uint64_t x = words_[position_++];
    x ^= (x >> 29) & 0x5555555555555555ULL;
    x ^= (x << 17) & 0x71D67FFFEDA60000ULL;
    x ^= (x << 37) & 0xFFF7EEE000000000ULL;
    return x ^ (x >> 43);
  }
  // As libstdc++ writes std::mt19937_64: the 312 state words, each followed by a space, then the
  // position of the next word.
  std::string text() const;
  // Reads text(); false (and no change) when it is malformed.
  bool set_text(const std::string& text);

 private:
  void twist();
  std::uint64_t words_[kWords];
  int position_ = kWords;
};

}  // namespace detail

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : engine_(seed), seed_(seed) {}

  void manual_seed(std::uint64_t seed) {
    engine_.seed(seed);
    seed_ = seed;
    has_spare_normal_ = false;
  }
  std::uint64_t initial_seed() const { return seed_; }

  std::uint64_t next_u64() { return engine_(); }
  // Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  double uniform(double low, double high) { return low + (high - low) * uniform(); }
  // Standard normal by the Box-Muller transform, written out here rather than taken from
  // <random> so the same seed gives the same numbers with every standard library.
  double normal();
  // Uniform integer in [0, n).
  std::uint64_t randint(std::uint64_t n);
  // v in a uniformly random order: Fisher-Yates from the back, written out (std::shuffle's
  // algorithm differs between standard libraries).
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[static_cast<std::size_t>(randint(i))]);
  }

  // The complete state as text, and back (for checkpoints).
  std::string state() const;
  void set_state(const std::string& state);

 private:
  detail::Mt19937_64 engine_;
  std::uint64_t seed_;
  bool has_spare_normal_ = false;
  double spare_normal_ = 0.0;
};

// The seed of stream `index` of `seed` (splitmix64 of both): neighbouring (seed, index) pairs give unrelated
// seeds, not shifted copies of one mt19937 stream. Data loaders seed each epoch's or step's draws with it.
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t index);

// The default generator of the calling thread. It is thread_local: each thread has its own,
// starting at seed 0 (as Generator() does), so threads never share one without a lock and a
// thread's draws do not depend on what other threads do. manual_seed seeds the calling thread's.
Generator& default_generator();
void manual_seed(std::uint64_t seed);

}  // namespace tapegrad
