// data::Subwords: fastText's character n-grams of a word and their hash buckets.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tapegrad/data/subwords.h"
#include "tapegrad/tapegrad.h"

using namespace tapegrad;

TEST_CASE("subwords: the n-grams of a word within its boundary markers, by start and then length") {
  const data::Subwords subwords(data::SubwordOptions().minn(3).maxn(6));
  CHECK(subwords.ngrams("where") == std::vector<std::string>{"<wh", "<whe", "<wher", "<where", "whe", "wher", "where",
                                                             "where>", "her", "here", "here>", "ere", "ere>", "re>"});
  // A word shorter than minn has only its marked form's n-grams; a single character n-gram is never a marker.
  CHECK(subwords.ngrams("a") == std::vector<std::string>{"<a>"});
  CHECK(data::Subwords(data::SubwordOptions().minn(1).maxn(2)).ngrams("ab") ==
        std::vector<std::string>{"<a", "a", "ab", "b", "b>"});
}

TEST_CASE("subwords: a UTF-8 character counts once and is never cut") {
  const data::Subwords subwords(data::SubwordOptions().minn(2).maxn(3));
  // "<naïve>": 7 characters, 8 bytes.
  CHECK(subwords.ngrams("na\xc3\xafve") == std::vector<std::string>{"<n", "<na", "na", "na\xc3\xaf", "a\xc3\xaf",
                                                                    "a\xc3\xafv", "\xc3\xafv", "\xc3\xafve", "ve",
                                                                    "ve>", "e>"});
}

TEST_CASE("subwords: buckets are 32-bit FNV-1a with bytes sign-extended modulo the bucket count") {
  // FNV-1a's published values for ASCII, where sign extension changes nothing.
  CHECK(data::Subwords::hash("") == 2166136261U);
  CHECK(data::Subwords::hash("a") == 0xe40c292cU);
  CHECK(data::Subwords::hash("foobar") == 0xbf9cf968U);
  // Bytes >= 0x80 are xored as negative 32-bit integers, as fastText's hash does (plain FNV-1a of
  // these two bytes is 0x1e9de8c1).
  CHECK(data::Subwords::hash("\xc3\xa9") == 0x3cfa68c1U);
  const data::Subwords subwords(data::SubwordOptions().minn(3).maxn(3).buckets(1000));
  const std::vector<std::int64_t> buckets = subwords.buckets("abcd");  // <ab abc bcd cd>
  REQUIRE(buckets.size() == 4);
  const std::vector<std::string> ngrams = subwords.ngrams("abcd");
  for (std::size_t i = 0; i < 4; ++i) CHECK(buckets[i] == data::Subwords::hash(ngrams[i]) % 1000);
}

TEST_CASE("subwords: options out of range are a ValueError naming them") {
  const std::string message =
      "Subwords: expected 1 <= minn <= maxn and 1 <= buckets <= 2^32, got minn 4, maxn 3 and "
      "buckets 2000000";
  CHECK_THROWS_WITH_AS(data::Subwords(data::SubwordOptions().minn(4).maxn(3)), message.c_str(), ValueError);
  CHECK_THROWS_AS(data::Subwords(data::SubwordOptions().minn(0)), ValueError);
  CHECK_THROWS_AS(data::Subwords(data::SubwordOptions().buckets(0)), ValueError);
}
