// data::TokenStream: language-modelling windows of a long sequence.

#include <doctest/doctest.h>

#include <cstdint>
#include <numeric>
#include <set>

#include "tapegrad/data/token_stream.h"

using namespace tapegrad;

namespace {

std::vector<std::int64_t> iota_tokens(std::int64_t n) {
  std::vector<std::int64_t> t(static_cast<std::size_t>(n));
  std::iota(t.begin(), t.end(), 0);
  return t;
}

}  // namespace

TEST_CASE(
    "token stream: a step's batch is reproducible, its targets are the inputs shifted by one, and starts cover the "
    "range") {
  const data::TokenStream stream(iota_tokens(20), data::TokenStreamOptions().batch_size(3).context(4).seed(5));
  const data::TokenBatch a = stream.batch_at(7);
  const data::TokenBatch again = data::TokenStream(iota_tokens(20), stream.options()).batch_at(7);
  CHECK(a.input.shape() == Shape{3, 4});
  CHECK(a.target.shape() == Shape{3, 4});
  CHECK(a.tokens() == 12);
  CHECK(a.starts == again.starts);
  CHECK(a.input.to_vector<std::int64_t>() == again.input.to_vector<std::int64_t>());
  const std::vector<std::int64_t> in = a.input.to_vector<std::int64_t>(), tgt = a.target.to_vector<std::int64_t>();
  for (std::size_t r = 0; r < 3; ++r)
    for (std::size_t j = 0; j < 4; ++j) {
      CHECK(in[r * 4 + j] == a.starts[r] + static_cast<std::int64_t>(j));  // tokens are their positions
      CHECK(tgt[r * 4 + j] == in[r * 4 + j] + 1);
    }
  std::set<std::int64_t> seen;
  bool steps_differ = false;
  for (std::int64_t step = 0; step < 300; ++step) {
    const data::TokenBatch b = stream.batch_at(step);
    for (std::int64_t s : b.starts) seen.insert(s);
    steps_differ = steps_differ || b.starts != a.starts;
  }
  CHECK(steps_differ);
  // Starts 0 .. N - T - 1 = 15: the last window's target is the last token.
  CHECK(seen.size() == 16);
  CHECK(*seen.begin() == 0);
  CHECK(*seen.rbegin() == 15);
  // Another seed draws other windows.
  const data::TokenStream other(iota_tokens(20), data::TokenStreamOptions().batch_size(3).context(4).seed(6));
  CHECK(other.batch_at(7).starts != a.starts);
}

TEST_CASE("token stream: evaluation reads consecutive windows, or an even spread of at most max_windows") {
  const data::TokenStream stream(iota_tokens(23), data::TokenStreamOptions().batch_size(2).context(5));
  // (23 - 1) / 5 = 4 windows: starts 0, 5, 10, 15; the last two targets (21, 22) are not scored.
  CHECK(stream.eval_windows() == 4);
  const std::vector<data::TokenBatch> all = stream.eval_batches();
  REQUIRE(all.size() == 2);
  CHECK(all[0].starts == std::vector<std::int64_t>{0, 5});
  CHECK(all[1].starts == std::vector<std::int64_t>{10, 15});
  CHECK(all[1].target.to_vector<std::int64_t>().back() == 20);
  const std::vector<data::TokenBatch> some = stream.eval_batches(3);
  REQUIRE(some.size() == 2);
  CHECK(some[0].starts == std::vector<std::int64_t>{0, 5});
  CHECK(some[1].starts == std::vector<std::int64_t>{10});
  CHECK(stream.eval_windows(10) == 4);
  CHECK(stream.batches_per_epoch() == 2);
}

TEST_CASE("token stream: bad options, a short sequence and bad steps or starts are errors naming the values") {
  CHECK_THROWS_WITH_AS(data::TokenStream(iota_tokens(4), data::TokenStreamOptions().context(4)),
                       "TokenStream: a sequence of 4 tokens is too short for one window of 4 tokens and its targets "
                       "(needs 5)",
                       ValueError);
  CHECK_THROWS_WITH_AS(data::TokenStream(iota_tokens(4), data::TokenStreamOptions().context(INT64_MAX)),
                       "TokenStream: a sequence of 4 tokens is too short for one window of 9223372036854775807 "
                       "tokens and its targets (needs 9223372036854775808)",
                       ValueError);
  CHECK_THROWS_WITH_AS(
      data::TokenStream(iota_tokens(40), data::TokenStreamOptions().context(4).batch_size(INT64_MAX / 2)),
      "TokenStream: batch_size 4611686018427387903 x context 4 is more than 4294967296 tokens a batch", ValueError);
  CHECK_THROWS_WITH_AS(data::TokenStream(iota_tokens(40), data::TokenStreamOptions().batch_size(0)),
                       "TokenStream: batch_size and context must be >= 1, got 0 and 128", ValueError);
  const data::TokenStream stream(iota_tokens(10), data::TokenStreamOptions().context(4));
  CHECK_THROWS_WITH_AS(stream.batch_at(-1), "TokenStream::batch_at: step must be >= 0, got -1", ValueError);
  CHECK_THROWS_WITH_AS(stream.windows({6}), "TokenStream: window start 6 is outside [0, 5] for 10 tokens and context 4",
                       ValueError);
  CHECK_THROWS_AS(stream.eval_batches(-2), ValueError);
}
