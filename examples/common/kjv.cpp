// bible.data reader: the container, compress(1)'s LZW and the verse lines. See kjv.h.

#include "examples/common/kjv.h"

#include <cstring>
#include <filesystem>

#include "tapegrad/autograd/error.h"
#include "tapegrad/io/file.h"

namespace tapegrad::examples {

namespace {

constexpr std::string_view kMagic = "EC02Compressed Data File";
constexpr std::size_t kWindowField = 84;
constexpr std::size_t kCountField = 88;
constexpr std::size_t kOffsetsField = 92;
constexpr std::uint32_t kClearCode = 256;
constexpr std::uint64_t kMaxFileBytes = std::uint64_t{1} << 28;

std::uint32_t read_be32(const std::string& bytes, std::size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + at);
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

// Reads codes of the current width from a little-endian bit stream, with compress's groups: the
// codes of one width come in groups of eight (n_bits bytes), and a width change or a clear skips
// to the end of the current group.
class CodeReader {
 public:
  explicit CodeReader(std::string_view bytes) : bytes_(bytes), total_bits_(bytes.size() * 8) {}

  // False at the end of the stream (fewer than width bits left).
  bool next(int width, std::uint32_t& code) {
    if (pos_ + static_cast<std::uint64_t>(width) > total_bits_) return false;
    std::uint32_t value = 0;
    const std::uint64_t byte = pos_ >> 3;
    for (std::uint64_t i = 0; i < 4 && byte + i < bytes_.size(); ++i)
      value |= std::uint32_t{static_cast<unsigned char>(bytes_[byte + i])} << (8 * i);
    code = (value >> (pos_ & 7)) & ((std::uint32_t{1} << width) - 1);
    pos_ += static_cast<std::uint64_t>(width);
    return true;
  }

  // Skips the rest of the current group of width-bit codes and starts a new one.
  void end_group(int width) {
    const std::uint64_t group_bits = 8 * static_cast<std::uint64_t>(width);
    const std::uint64_t used = (pos_ - group_start_) % group_bits;
    if (used != 0) pos_ += group_bits - used;
    group_start_ = pos_;
  }

 private:
  std::string_view bytes_;
  std::uint64_t total_bits_;
  std::uint64_t pos_ = 0;
  std::uint64_t group_start_ = 0;
};

}  // namespace

std::string lzw_decompress(std::string_view stream, int max_bits, bool block_mode, std::size_t max_output,
                           const std::string& what) {
  if (max_bits < 9 || max_bits > 16)
    throw IoError(message(what, ": LZW code width must be 9..16 bits, got ", max_bits));
  const std::uint32_t table_size = std::uint32_t{1} << max_bits;
  std::vector<std::uint16_t> prefix(table_size);
  std::vector<unsigned char> suffix(table_size);
  for (std::uint32_t c = 0; c < 256; ++c) suffix[c] = static_cast<unsigned char>(c);
  std::string stack;
  std::string out;

  CodeReader reader(stream);
  const std::uint32_t first_free = block_mode ? kClearCode + 1 : kClearCode;
  int width = 9;
  std::uint32_t free_code = first_free;
  bool have_previous = false;
  std::uint32_t previous = 0;
  unsigned char first_of_previous = 0;
  std::uint32_t code = 0;
  while (true) {
    // Once the next free code no longer fits, the width grows (up to max_bits).
    if (width < max_bits && free_code > (std::uint32_t{1} << width) - 1) {
      reader.end_group(width);
      ++width;
    }
    if (!reader.next(width, code)) break;
    if (block_mode && code == kClearCode) {
      reader.end_group(width);
      width = 9;
      free_code = first_free;
      have_previous = false;
      continue;
    }
    if (!have_previous) {
      if (code >= 256) throw IoError(message(what, ": corrupt LZW stream: first code ", code, " is not a byte"));
      out.push_back(static_cast<char>(code));
      previous = code;
      first_of_previous = static_cast<unsigned char>(code);
      have_previous = true;
      continue;
    }
    if (code > free_code || (code == free_code && free_code >= table_size))
      throw IoError(
          message(what, ": corrupt LZW stream: code ", code, " is not defined yet (next free ", free_code, ")"));
    // Unwind the string of `code` (backwards) onto the stack; code == free_code is the string of
    // the previous code followed by its own first byte.
    stack.clear();
    std::uint32_t c = code;
    if (code == free_code) {
      stack.push_back(static_cast<char>(first_of_previous));
      c = previous;
    }
    while (c >= 256) {
      stack.push_back(static_cast<char>(suffix[c]));
      c = prefix[c];
    }
    stack.push_back(static_cast<char>(c));
    if (out.size() + stack.size() > max_output)
      throw IoError(message(what, ": LZW stream decodes to more than ", max_output, " bytes"));
    out.append(stack.rbegin(), stack.rend());
    first_of_previous = static_cast<unsigned char>(c);
    if (free_code < table_size) {
      prefix[free_code] = static_cast<std::uint16_t>(previous);
      suffix[free_code] = first_of_previous;
      ++free_code;
    }
    previous = code;
  }
  return out;
}

std::string read_bible_data(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw IoError(path +
                  ": no such file; it comes with Debian's bible-kjv-text package (scripts/install-deps.sh "
                  "installs it)");
  const std::string bytes = io::read_file(path, kMaxFileBytes);
  const auto bad = [&](const std::string& why) { throw IoError(path + ": not a bible-kjv-text data file: " + why); };
  if (bytes.size() < kOffsetsField || bytes.compare(0, kMagic.size(), kMagic) != 0)
    bad("it does not start with \"" + std::string(kMagic) + "\"");
  const std::uint32_t window = read_be32(bytes, kWindowField);
  const std::uint32_t count = read_be32(bytes, kCountField);
  if (window == 0 || window > (1u << 24)) bad("window " + std::to_string(window) + " is not in 1..2^24");
  if (count == 0 || count > 1u << 16) bad("block count " + std::to_string(count) + " is not in 1..65536");
  const std::size_t offsets_end = kOffsetsField + 4 * (static_cast<std::size_t>(count) + 1);
  if (bytes.size() < offsets_end + 3)
    bad("it ends inside the block offsets (" + std::to_string(bytes.size()) + " bytes)");
  std::vector<std::size_t> offsets(count + 1);
  for (std::uint32_t i = 0; i <= count; ++i) offsets[i] = read_be32(bytes, kOffsetsField + 4 * std::size_t{i});
  if (offsets[0] != offsets_end + 3)
    bad("block 0 starts at " + std::to_string(offsets[0]) + ", expected " + std::to_string(offsets_end + 3));
  for (std::uint32_t i = 0; i < count; ++i)
    if (offsets[i + 1] <= offsets[i] || offsets[i + 1] > bytes.size())
      bad("block " + std::to_string(i) + " spans [" + std::to_string(offsets[i]) + ", " +
          std::to_string(offsets[i + 1]) + ") in a file of " + std::to_string(bytes.size()) + " bytes");
  const auto* header = reinterpret_cast<const unsigned char*>(bytes.data() + offsets_end);
  if (header[0] != 0x1f || header[1] != 0x9d) bad("no compress(1) header (1f 9d) before block 0");
  const int max_bits = header[2] & 0x1f;
  const bool block_mode = (header[2] & 0x80) != 0;

  std::string text;
  text.reserve(static_cast<std::size_t>(window) * count);
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::string what = path + ": block " + std::to_string(i);
    const std::string_view stream(bytes.data() + offsets[i], offsets[i + 1] - offsets[i]);
    const std::string block = lzw_decompress(stream, max_bits, block_mode, window, what);
    const bool last = i + 1 == count;
    if (block.empty() || (!last && block.size() != window))
      throw IoError(message(what, ": decodes to ", block.size(), " bytes, expected ", (last ? "1.." : ""), window));
    text += block;
  }
  return text;
}

Bible parse_bible(const std::string& text, const std::string& origin) {
  Bible bible;
  std::size_t start = 0;
  std::int64_t line_number = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + start, end - start);
    start = end + 1;
    ++line_number;
    if (line_number == 1) {
      bible.title = std::string(line);
      continue;
    }
    if (line.empty()) continue;
    // "<book><chapter>:<verse> <text>": the book may start with a digit (1Sa), so the chapter is
    // the run of digits just before the colon.
    const std::size_t space = line.find(' ');
    const std::size_t colon = line.substr(0, space).find(':');
    const auto bad_line = [&]() {
      throw IoError(message(origin, ": line ", line_number, " is not \"<book><chapter>:<verse> <text>\": \"",
                            line.substr(0, 60), (line.size() > 60 ? "...\"" : "\"")));
    };
    if (space == std::string_view::npos || colon == std::string_view::npos || colon == 0) bad_line();
    std::size_t chapter_start = colon;
    while (chapter_start > 0 && line[chapter_start - 1] >= '0' && line[chapter_start - 1] <= '9') --chapter_start;
    if (chapter_start == 0 || chapter_start == colon || colon - chapter_start > 6 || colon + 1 == space ||
        space - colon > 7)
      bad_line();
    BibleVerse verse;
    verse.book = std::string(line.substr(0, chapter_start));
    for (std::size_t i = chapter_start; i < colon; ++i) verse.chapter = verse.chapter * 10 + (line[i] - '0');
    for (std::size_t i = colon + 1; i < space; ++i) {
      if (line[i] < '0' || line[i] > '9') bad_line();
      verse.verse = verse.verse * 10 + (line[i] - '0');
    }
    verse.text = std::string(line.substr(space + 1));
    if (bible.books.empty() || bible.books.back() != verse.book) bible.books.push_back(verse.book);
    bible.verses.push_back(std::move(verse));
  }
  return bible;
}

Bible load_bible(const std::string& path) { return parse_bible(read_bible_data(path), path); }

}  // namespace tapegrad::examples
