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
#include <random>
#include <string>

namespace tapegrad {

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

  // The complete state as text, and back (for checkpoints).
  std::string state() const;
  void set_state(const std::string& state);

 private:
  std::mt19937_64 engine_;
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
