#pragma once
// A word as fastText represents it (Bojanowski et al. 2017): its character n-grams, hashed into a
// fixed number of buckets, so a word never seen in training still has a vector, the mean of its
// n-grams' rows.
//
//   data::Subwords subwords(data::SubwordOptions().minn(3).maxn(6).buckets(2000000));
//   subwords.ngrams("where");   // "<wh", "<whe", "<wher", "<where", "whe", ..., "re>"
//   subwords.buckets("where");  // each n-gram's bucket, in [0, 2000000), in the same order
//
// The word is wrapped in the boundary markers "<" and ">"; its n-grams are the runs of minn to
// maxn characters (UTF-8 sequences count as one character and are never cut) starting at each
// character, in order of start and then length; a marker alone is never an n-gram. The bucket of
// an n-gram is its 32-bit FNV-1a hash modulo the bucket count, each byte sign-extended before the
// xor as fastText does, so the buckets are fastText's for the same n-grams and bucket count.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tapegrad/autograd/arg.h"

namespace tapegrad::data {

struct SubwordOptions {
  TAPEGRAD_ARG(std::int64_t, minn) = 3;           // shortest n-gram, in characters
  TAPEGRAD_ARG(std::int64_t, maxn) = 6;           // longest
  TAPEGRAD_ARG(std::int64_t, buckets) = 2000000;  // fastText's default
};

class Subwords {
 public:
  // ValueError naming the values unless 1 <= minn <= maxn and 1 <= buckets <= 2^32.
  explicit Subwords(const SubwordOptions& options = SubwordOptions());

  std::vector<std::string> ngrams(std::string_view word) const;
  std::vector<std::int64_t> buckets(std::string_view word) const;

  // The 32-bit FNV-1a hash with fastText's sign extension of each byte.
  static std::uint32_t hash(std::string_view text);

  const SubwordOptions& options() const { return options_; }

 private:
  // Calls emit(ngram) for each n-gram of word, in the order above.
  template <class Emit>
  void each_ngram(std::string_view word, Emit&& emit) const;

  SubwordOptions options_;
};

}  // namespace tapegrad::data
