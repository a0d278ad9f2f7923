// io::save_word2vec / load_word2vec: gensim's files (tests/data/word2vec, written by
// tests/word2vec_reference/make_reference.py) read bit for bit, our files read back the same and
// our binary file is gensim's plus word2vec.c's newline after each vector, and bad files are
// IoErrors naming the file and the place.

#include <doctest/doctest.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/io/io.h"
#include "testing.h"

using namespace tapegrad;
using testing::TempDir;

namespace {

const std::string kDir = std::string(TAPEGRAD_TEST_DATA_DIR) + "/word2vec";

struct Reference {
  std::vector<std::string> words;
  Tensor vectors;  // float32
};

Reference reference() {
  const nlohmann::json j = nlohmann::json::parse(io::read_file(kDir + "/reference.json"));
  Reference r;
  std::vector<float> values;
  for (const auto& w : j["words"]) r.words.push_back(w.get<std::string>());
  for (const auto& row : j["vectors"])
    for (const auto& v : row) values.push_back(static_cast<float>(v.get<double>()));
  r.vectors = from_vector(values, {static_cast<std::int64_t>(r.words.size()), 5});
  return r;
}

// Bitwise equality of two float32 tensors (so -0.0 and 0.0 differ, and NaNs compare).
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  return std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

std::string load_error(const std::string& path, const std::string& bytes, io::Word2VecFormat format) {
  testing::write_text(path, bytes);
  try {
    io::load_word2vec(path, format);
  } catch (const IoError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("word2vec format: gensim's text and binary files load with every float32 bit") {
  const Reference ref = reference();
  for (const auto& [file, format] :
       {std::pair{"gensim.txt", io::Word2VecFormat::Text}, std::pair{"gensim.bin", io::Word2VecFormat::Binary}}) {
    CAPTURE(file);
    const io::WordVectors wv = io::load_word2vec(kDir + "/" + file, format);
    CHECK(wv.words == ref.words);
    CHECK(wv.vectors.dtype() == kFloat32);
    CHECK(same_bits(wv.vectors, ref.vectors));
  }
}

TEST_CASE("word2vec format: what save_word2vec writes loads back the same, and the binary file is gensim's") {
  const Reference ref = reference();
  TempDir dir;
  const std::string text = (dir.path / "tapegrad.txt").string(), binary = (dir.path / "tapegrad.bin").string();
  io::save_word2vec(text, ref.words, ref.vectors, io::Word2VecFormat::Text);
  io::save_word2vec(binary, ref.words, ref.vectors, io::Word2VecFormat::Binary);
  for (const auto& [path, format] :
       {std::pair{text, io::Word2VecFormat::Text}, std::pair{binary, io::Word2VecFormat::Binary}}) {
    const io::WordVectors wv = io::load_word2vec(path, format);
    CHECK(wv.words == ref.words);
    CHECK(same_bits(wv.vectors, ref.vectors));
  }
  // word2vec.c ends each binary vector with a newline, gensim does not; otherwise the bytes agree.
  std::string ours = io::read_file(binary);
  const std::string theirs = io::read_file(kDir + "/gensim.bin");
  std::string without_newlines = ours.substr(0, ours.find('\n') + 1);
  std::size_t pos = without_newlines.size();
  for (std::size_t i = 0; i < ref.words.size(); ++i) {
    const std::size_t n = ref.words[i].size() + 1 + 5 * sizeof(float);
    without_newlines += ours.substr(pos, n);
    CHECK(ours[pos + n] == '\n');
    pos += n + 1;
  }
  CHECK(pos == ours.size());
  CHECK(without_newlines == theirs);
  // The text file: the header, then one line per word.
  const std::string t = io::read_file(text);
  CHECK(t.rfind("6 5\nthe ", 0) == 0);
  CHECK(std::count(t.begin(), t.end(), '\n') == 7);
  if (const char* out = std::getenv("TAPEGRAD_WORD2VEC_OUT")) {  // for make_reference.py --check
    io::save_word2vec(std::string(out) + "/tapegrad.txt", ref.words, ref.vectors, io::Word2VecFormat::Text);
    io::save_word2vec(std::string(out) + "/tapegrad.bin", ref.words, ref.vectors, io::Word2VecFormat::Binary);
  }
}

TEST_CASE("word2vec format: float64 vectors are written exactly as doubles and load as their float32 rounding") {
  Generator gen(1);
  const Tensor v = randn({3, 4}, gen, kFloat64) * 1e3;
  TempDir dir;
  const std::string path = (dir.path / "v.txt").string();
  io::save_word2vec(path, {"a", "b", "c"}, v, io::Word2VecFormat::Text);
  CHECK(same_bits(io::load_word2vec(path, io::Word2VecFormat::Text).vectors, v.to(kFloat32)));
  // Each number in the file reads back as the very double that was written.
  const std::string text = io::read_file(path);
  std::vector<double> parsed;
  std::size_t line_start = text.find('\n') + 1;
  while (line_start < text.size()) {
    const std::size_t line_end = text.find('\n', line_start);
    std::size_t pos = text.find(' ', line_start) + 1;  // past the word
    while (pos < line_end) {
      std::size_t next = text.find(' ', pos);
      if (next == std::string::npos || next > line_end) next = line_end;
      double d = 0;
      std::from_chars(text.data() + pos, text.data() + next, d);
      parsed.push_back(d);
      pos = next + 1;
    }
    line_start = line_end + 1;
  }
  CHECK(parsed == v.to_vector<double>());
  // word2vec.c's text files end every number with a space; a file without vectors is fine too.
  testing::write_text(path, "2 2\nx 1.5 -2 \ny 0 3e-2 \n");
  const io::WordVectors wv = io::load_word2vec(path, io::Word2VecFormat::Text);
  CHECK(wv.words == std::vector<std::string>{"x", "y"});
  CHECK(same_bits(wv.vectors, from_vector(std::vector<float>{1.5f, -2.0f, 0.0f, 0.03f}, {2, 2})));
  testing::write_text(path, "0 7\n");
  CHECK(io::load_word2vec(path, io::Word2VecFormat::Text).vectors.shape() == Shape{0, 7});
}

TEST_CASE("word2vec format: bad files are IoErrors naming the file and the place") {
  TempDir dir;
  const std::string p = (dir.path / "bad").string();
  using F = io::Word2VecFormat;
  CHECK(load_error(p, "3\nx 1\n", F::Text) ==
        "load_word2vec: " + p +
            " (text): expected a header \"<count> <dimension>\" with count >= 0 and dimension >= 1, got \"3\"");
  CHECK(load_error(p, "2 2\nx 1 2\n", F::Text) ==
        "load_word2vec: " + p + " (text): the header promises 2 words, the file has 1");
  CHECK(load_error(p, "1 2\nx 1\n", F::Text) ==
        "load_word2vec: " + p + " (text): line 2 has 2 fields, expected a word and 2 numbers");
  CHECK(load_error(p, "1 2\nx 1 two\n", F::Text) == "load_word2vec: " + p + " (text): line 2: \"two\" is not a number");
  CHECK(load_error(p, "2 1\nx 1\nx 2\n", F::Text) ==
        "load_word2vec: " + p + " (text): word \"x\" (index 1) appears twice");
  CHECK(load_error(p, "1 1\nx 1\ny 2\n", F::Text) ==
        "load_word2vec: " + p + " (text): data after the 1 words the header promises (4 bytes)");
  CHECK(load_error(p, std::string("1 2\nx ") + std::string(5, 'a'), F::Binary) ==
        "load_word2vec: " + p + " (binary): the vector of word 0 needs 8 bytes, 5 are left");
  CHECK(load_error(p, std::string("2 1\nx ") + std::string(4, '\0') + "\n", F::Binary) ==
        "load_word2vec: " + p + " (binary): word 1 is missing: the file ends at byte 11");
  // A header promising more than the file can hold is refused before anything is allocated.
  CHECK(load_error(p, "4000000000 4000000000\nx 1\n", F::Text) ==
        "load_word2vec: " + p +
            " (text): the header promises 4000000000 words of dimension 4000000000, more than the 4 bytes after it can "
            "hold");
  CHECK(load_error(p, "100000000 300\n", F::Binary) ==
        "load_word2vec: " + p +
            " (binary): the header promises 100000000 words of dimension 300, more than the 0 bytes after it can hold");
  CHECK(load_error(p, "0 9223372036854775807\n", F::Text) ==
        "load_word2vec: " + p +
            " (text): the header promises no words, of dimension 9223372036854775807, more than "
            "16777216");
  CHECK(load_error(p, "1 2\nx 1 1e50\n", F::Text) ==
        "load_word2vec: " + p + " (text): line 2: \"1e50\" is outside float32's range");
  const std::string missing = (dir.path / "missing").string();
  CHECK_THROWS_WITH_AS(io::load_word2vec(missing, F::Text),
                       ("load_word2vec: cannot open " + missing + ": No such file or directory").c_str(), IoError);
}

TEST_CASE("word2vec format: save_word2vec refuses what the format cannot hold, and a failed save loses nothing") {
  TempDir dir;
  const std::string p = (dir.path / "v.txt").string();
  const Tensor v = zeros({2, 3});
  using F = io::Word2VecFormat;
  CHECK_THROWS_WITH_AS(io::save_word2vec(p, {"a"}, v, F::Text),
                       ("save_word2vec: " + p + ": 1 words for 2 vectors").c_str(), ValueError);
  CHECK_THROWS_WITH_AS(
      io::save_word2vec(p, {"a", "b c"}, v, F::Text),
      ("save_word2vec: " + p + ": word 1 (\"b c\") is empty or holds whitespace, which the format cannot store")
          .c_str(),
      ValueError);
  CHECK_THROWS_WITH_AS(io::save_word2vec(p, {"a", "a"}, v, F::Binary),
                       ("save_word2vec: " + p + ": word \"a\" appears twice (index 1)").c_str(), ValueError);
  CHECK_THROWS_WITH_AS(
      io::save_word2vec(p, {"a", "b"}, zeros({2, 3}, kInt64), F::Text),
      ("save_word2vec: " + p + ": expected float32 or float64 vectors (V, D), got int64 (2,3)").c_str(), ShapeError);
  // A file that exists stays as it was when a later save fails.
  io::save_word2vec(p, {"a", "b"}, v, F::Text);
  const std::string before = io::read_file(p);
  CHECK_THROWS_AS(io::save_word2vec(p, {"a", ""}, v, F::Text), ValueError);
  CHECK(io::read_file(p) == before);
  CHECK_THROWS_WITH_AS(io::save_word2vec((dir.path / "no" / "such" / "dir.txt").string(), {"a", "b"}, v, F::Text),
                       doctest::Contains("save_word2vec: cannot create "), IoError);
  // Readers keep float32: 1e300 would be saved as inf in binary and unreadable as text.
  const Tensor wide = from_vector(std::vector<double>{0.5, 1e300, -2.0, 3.0, 4.0, 5.0}, {2, 3});
  for (const F format : {F::Text, F::Binary})
    CHECK_THROWS_WITH_AS(io::save_word2vec(p, {"a", "b"}, wide, format),
                         ("save_word2vec: " + p +
                          ": word \"a\" has 1e+300 at 1, beyond float32's range, which the "
                          "format's readers keep")
                             .c_str(),
                         ValueError);
  CHECK(io::read_file(p) == before);
  CHECK_THROWS_WITH_AS(io::save_word2vec(p, {"a", "b"}, Tensor(), F::Text),
                       ("save_word2vec: " + p + ": the vectors are an undefined tensor").c_str(), ValueError);
}
