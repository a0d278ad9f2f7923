#include "tapegrad/autograd/generator.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "tapegrad/autograd/error.h"

namespace tapegrad {

namespace detail {

void Mt19937_64::seed(std::uint64_t value) {
  words_[0] = value;
  for (int i = 1; i < kWords; ++i)
    words_[i] = 6364136223846793005ULL * (words_[i - 1] ^ (words_[i - 1] >> 62)) + static_cast<std::uint64_t>(i);
  position_ = kWords;
}

void Mt19937_64::twist() {
  constexpr int kShift = 156;
  constexpr std::uint64_t kUpper = ~std::uint64_t{0} << 31, kLower = ~kUpper;  // 33 and 31 bits
  constexpr std::uint64_t kMatrix = 0xB5026F5AA96619E9ULL;
  auto next = [&](int i, int j, int k) {
    const std::uint64_t y = (words_[i] & kUpper) | (words_[j] & kLower);
    words_[i] = words_[k] ^ (y >> 1) ^ ((y & 1u) != 0 ? kMatrix : 0);
  };
  int i = 0;
  for (; i < kWords - kShift; ++i) next(i, i + 1, i + kShift);
  for (; i < kWords - 1; ++i) next(i, i + 1, i + kShift - kWords);
  next(kWords - 1, 0, kShift - 1);
  position_ = 0;
}

std::string Mt19937_64::text() const {
  std::ostringstream out;
  for (const std::uint64_t word : words_) out << word << ' ';
  out << position_;
  return out.str();
}

bool Mt19937_64::set_text(const std::string& text) {
  std::istringstream in(text);
  std::uint64_t words[kWords];
  int position = 0;
  for (std::uint64_t& word : words) in >> word;
  in >> position;
  if (!in || position < 0 || position > kWords) return false;
  std::copy(words, words + kWords, words_);
  position_ = position;
  return true;
}

}  // namespace detail

double Generator::normal() {
  if (has_spare_normal_) {
    has_spare_normal_ = false;
    return spare_normal_;
  }
  // 1 - uniform() lies in (0, 1], so the logarithm is finite.
  const double u1 = 1.0 - uniform();
  const double u2 = uniform();
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * M_PI * u2;
  spare_normal_ = radius * std::sin(angle);
  has_spare_normal_ = true;
  return radius * std::cos(angle);
}

std::uint64_t Generator::randint(std::uint64_t n) {
  if (n == 0) throw ValueError("Generator::randint: the range must not be empty (n = 0)");
  // Rejection sampling removes the modulo bias.
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
  std::uint64_t r;
  do r = engine_();
  while (r >= limit);
  return r % n;
}

std::string Generator::state() const {
  std::ostringstream out;
  out.precision(17);
  out << seed_ << ' ' << has_spare_normal_ << ' ' << std::hexfloat << spare_normal_ << std::defaultfloat << ' '
      << engine_.text();
  return out.str();
}

void Generator::set_state(const std::string& state) {
  std::istringstream in(state);
  std::uint64_t seed;
  bool has_spare;
  std::string spare_text;
  in >> seed >> has_spare >> spare_text;
  std::string engine_text;
  std::getline(in, engine_text);
  detail::Mt19937_64 engine(0);
  if (!in || !engine.set_text(engine_text)) throw ValueError("Generator::set_state: the state string is malformed");
  seed_ = seed;
  has_spare_normal_ = has_spare;
  spare_normal_ = std::strtod(spare_text.c_str(), nullptr);
  engine_ = engine;
}

Generator& default_generator() {
  thread_local Generator gen;
  return gen;
}

void manual_seed(std::uint64_t seed) { default_generator().manual_seed(seed); }

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t index) { return splitmix64(splitmix64(seed) ^ index); }

}  // namespace tapegrad
