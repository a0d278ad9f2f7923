#include "tapegrad/io/word2vec.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "tapegrad/autograd/error.h"
#include "tapegrad/io/file.h"

namespace tapegrad::io {

namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

const char* format_name(Word2VecFormat format) { return format == Word2VecFormat::Text ? "text" : "binary"; }

// A reader over a file's bytes that names the file in its errors.
class Reader {
 public:
  Reader(std::string path, std::string bytes, Word2VecFormat format)
      : path_(std::move(path)), bytes_(std::move(bytes)), format_(format) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw IoError("load_word2vec: " + path_ + " (" + format_name(format_) + "): " + what);
  }
  bool done() const { return pos_ >= bytes_.size(); }
  char peek() const { return bytes_[pos_]; }
  std::size_t remaining() const { return bytes_.size() - pos_; }

  // "<V> <D>\n": both positive (V may be 0).
  std::pair<std::int64_t, std::int64_t> header() {
    const std::size_t end = bytes_.find('\n');
    if (end == std::string::npos) fail("no header line \"<count> <dimension>\"");
    std::string_view line(bytes_.data(), end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::vector<std::string_view> fields = split(line);
    std::int64_t count = -1, dim = -1;
    if (fields.size() != 2 || !integer(fields[0], count) || !integer(fields[1], dim) || count < 0 || dim <= 0)
      fail("expected a header \"<count> <dimension>\" with count >= 0 and dimension >= 1, got \"" +
           std::string(line.substr(0, 80)) + "\"");
    pos_ = end + 1;
    return {count, dim};
  }

  // The next line without its "\n" (and "\r").
  std::string_view line() {
    const std::size_t end = bytes_.find('\n', pos_);
    const std::size_t stop = end == std::string::npos ? bytes_.size() : end;
    std::string_view l(bytes_.data() + pos_, stop - pos_);
    pos_ = end == std::string::npos ? bytes_.size() : end + 1;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    return l;
  }

  // Binary: the word up to the next space, after any newlines.
  std::string_view word(std::int64_t index) {
    while (!done() && peek() == '\n') ++pos_;
    const std::size_t space = bytes_.find(' ', pos_);
    if (done() || space == std::string::npos)
      fail("word " + std::to_string(index) + " is missing: the file ends at byte " + std::to_string(bytes_.size()));
    std::string_view w(bytes_.data() + pos_, space - pos_);
    pos_ = space + 1;
    return w;
  }

  const char* take(std::size_t n, std::int64_t index) {
    if (remaining() < n)
      fail("the vector of word " + std::to_string(index) + " needs " + std::to_string(n) + " bytes, " +
           std::to_string(remaining()) + " are left");
    const char* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }

  void skip_whitespace() {
    while (!done() && is_space(peek())) ++pos_;
  }

  static std::vector<std::string_view> split(std::string_view line) {
    std::vector<std::string_view> fields;
    std::size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      const std::size_t start = i;
      while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
      if (i > start) fields.push_back(line.substr(start, i - start));
    }
    return fields;
  }

  static bool integer(std::string_view s, std::int64_t& out) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
  }

 private:
  std::string path_;
  std::string bytes_;
  Word2VecFormat format_;
  std::size_t pos_ = 0;
};

// A number of a text file, the whole field, rounded once to float32 (from_chars: exponents, "inf"
// and "nan" are read, the locale is not consulted).
// The field as a float32: std::errc() when it is one, result_out_of_range when it is a number
// beyond float32's range, invalid_argument otherwise.
std::errc parse_number(std::string_view field, float& out) {
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), out);
  if (end != field.data() + field.size()) return std::errc::invalid_argument;
  return ec;
}

}  // namespace

void save_word2vec(const std::string& path, const std::vector<std::string>& words, const Tensor& vectors,
                   Word2VecFormat format) {
  if (!vectors.defined()) throw ValueError("save_word2vec: " + path + ": the vectors are an undefined tensor");
  if (vectors.dim() != 2 || (vectors.dtype() != kFloat32 && vectors.dtype() != kFloat64))
    throw ShapeError("save_word2vec: " + path + ": expected float32 or float64 vectors (V, D), got " +
                     dtype_name(vectors.dtype()) + " " + vectors.shape().str());
  const std::int64_t count = vectors.shape()[0], dim = vectors.shape()[1];
  if (static_cast<std::int64_t>(words.size()) != count)
    throw ValueError(message("save_word2vec: ", path, ": ", words.size(), " words for ", count, " vectors"));
  std::unordered_set<std::string_view> seen;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    bool blank = false;
    for (char c : w) blank = blank || is_space(c);
    if (w.empty() || blank)
      throw ValueError(message("save_word2vec: ", path, ": word ", i, " (\"", w,
                               "\") is empty or holds whitespace, which the format cannot store"));
    if (!seen.insert(w).second)
      throw ValueError(message("save_word2vec: ", path, ": word \"", w, "\" appears twice (index ", i, ")"));
  }
  std::string out = std::to_string(count) + " " + std::to_string(dim) + "\n";
  const bool binary = format == Word2VecFormat::Binary;
  const bool wide = vectors.dtype() == kFloat64;
  const std::vector<double> values = vectors.to(kFloat64).contiguous().to_vector<double>();
  // Readers (load_word2vec, gensim, word2vec.c) keep float32: a finite value beyond its range would
  // be saved as inf in binary, and as text no reader could read it back.
  constexpr double kFloat32Max = std::numeric_limits<float>::max();
  for (std::size_t k = 0; k < values.size(); ++k)
    if (std::isfinite(values[k]) && std::abs(values[k]) > kFloat32Max)
      throw ValueError(message("save_word2vec: ", path, ": word \"", words[k / static_cast<std::size_t>(dim)],
                               "\" has ", values[k], " at ", k % static_cast<std::size_t>(dim),
                               ", beyond float32's range, which the format's readers keep"));
  char number[64];
  for (std::int64_t i = 0; i < count; ++i) {
    out += words[static_cast<std::size_t>(i)];
    const double* row = values.data() + i * dim;
    if (binary) {
      out += ' ';
      for (std::int64_t j = 0; j < dim; ++j) {
        const float f = static_cast<float>(row[j]);
        char bytes[sizeof f];
        std::memcpy(bytes, &f, sizeof f);  // the machines tapegrad builds for are little-endian
        out.append(bytes, sizeof f);
      }
    } else {
      for (std::int64_t j = 0; j < dim; ++j) {
        // The shortest text that reads back as the same value (to_chars, which ignores the locale).
        number[0] = ' ';
        const auto [end, ec] = wide ? std::to_chars(number + 1, number + sizeof number, row[j])
                                    : std::to_chars(number + 1, number + sizeof number, static_cast<float>(row[j]));
        out.append(number, static_cast<std::size_t>(end - number));
      }
    }
    out += '\n';
  }
  with_caller("save_word2vec", [&] { write_file_atomic(path, out); });
}

WordVectors load_word2vec(const std::string& path, Word2VecFormat format) {
  Reader in(path, with_caller("load_word2vec", [&] { return read_file(path); }), format);
  const auto [count, dim] = in.header();
  // Every word and every number takes at least a byte: a header promising more than the file
  // could hold is refused, and what is reserved for the values never exceeds the file's size.
  const std::uint64_t left = in.remaining();
  if (count > 0 && (static_cast<std::uint64_t>(dim) > left || static_cast<std::uint64_t>(count) > left))
    in.fail("the header promises " + std::to_string(count) + " words of dimension " + std::to_string(dim) +
            ", more than the " + std::to_string(left) + " bytes after it can hold");
  constexpr std::int64_t kMaxEmptyDim = std::int64_t{1} << 24;  // no word to bound it by
  if (count == 0 && dim > kMaxEmptyDim)
    in.fail("the header promises no words, of dimension " + std::to_string(dim) + ", more than " +
            std::to_string(kMaxEmptyDim));
  WordVectors result;
  std::vector<float> values;
  values.reserve(static_cast<std::size_t>(
      std::min<std::uint64_t>(static_cast<std::uint64_t>(count), left / static_cast<std::uint64_t>(dim)) *
      static_cast<std::uint64_t>(dim)));
  std::unordered_set<std::string> seen;
  auto add_word = [&](std::string word, std::int64_t index) {
    if (word.empty()) in.fail("word " + std::to_string(index) + " is empty");
    if (!seen.insert(word).second) in.fail("word \"" + word + "\" (index " + std::to_string(index) + ") appears twice");
    result.words.push_back(std::move(word));
  };
  for (std::int64_t i = 0; i < count; ++i) {
    if (format == Word2VecFormat::Binary) {
      add_word(std::string(in.word(i)), i);
      const char* p = in.take(static_cast<std::size_t>(dim) * sizeof(float), i);
      for (std::int64_t j = 0; j < dim; ++j) {
        float f;
        std::memcpy(&f, p + j * static_cast<std::int64_t>(sizeof f), sizeof f);
        values.push_back(f);
      }
    } else {
      if (in.done())
        in.fail("the header promises " + std::to_string(count) + " words, the file has " + std::to_string(i));
      const std::vector<std::string_view> fields = Reader::split(in.line());
      if (static_cast<std::int64_t>(fields.size()) != dim + 1)
        in.fail("line " + std::to_string(i + 2) + " has " + std::to_string(fields.size()) +
                " fields, expected a word and " + std::to_string(dim) + " numbers");
      add_word(std::string(fields[0]), i);
      for (std::int64_t j = 0; j < dim; ++j) {
        float f;
        const std::errc parsed = parse_number(fields[static_cast<std::size_t>(j + 1)], f);
        if (parsed != std::errc())
          in.fail("line " + std::to_string(i + 2) + ": \"" + std::string(fields[static_cast<std::size_t>(j + 1)]) +
                  (parsed == std::errc::result_out_of_range ? "\" is outside float32's range" : "\" is not a number"));
        values.push_back(f);
      }
    }
  }
  in.skip_whitespace();
  if (!in.done())
    in.fail("data after the " + std::to_string(count) + " words the header promises (" +
            std::to_string(in.remaining()) + " bytes)");
  result.vectors = from_vector(values, {count, dim});
  return result;
}

}  // namespace tapegrad::io
