#pragma once
// The King James Bible from Debian's bible-kjv-text package, decoded by our own reader.
//
//   examples::Bible bible = examples::load_bible();          // /usr/lib/bible.data
//   bible.verses[0].text == "In the beginning God created the heaven and the earth."
//
// bible.data (measured on the Debian 12 package, 4.38) is
//   offset 0    "EC02Compressed Data File", zero-padded to 84 bytes
//   offset 84   big-endian uint32: the window, bytes of text per block (65536)
//   offset 88   big-endian uint32: n, the number of blocks
//   offset 92   n + 1 big-endian uint32 offsets: block i is the bytes [offset i, offset i+1)
//   then        the compress(1) header 0x1f 0x9d <flags> (flags & 0x1f: the largest code width;
//               0x80: block mode, code 256 clears the table), and the blocks
// Each block is a separate LZW stream in compress's format; all but the last decode to exactly one
// window. The text is one line per verse, "<book><chapter>:<verse> <text>", after a title line:
//   "Ge1:1 In the beginning God created the heaven and the earth."
//   "1Sa1:1 Now there was a certain man of Ramathaimzophim, ..."

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tapegrad::examples {

// Where bible-kjv-text installs the text.
inline constexpr const char* kBibleDataPath = "/usr/lib/bible.data";

// Decodes one LZW stream as compress(1) writes it, without the 3-byte header: codes of 9 up to
// max_bits bits (9..16), least significant bit first, written in groups of eight codes that are
// padded out whenever the code width grows or (block mode) the table is cleared by code 256.
// IoError naming `what` on a code that is not yet defined, or when the output would pass
// max_output bytes.
std::string lzw_decompress(std::string_view stream, int max_bits, bool block_mode, std::size_t max_output,
                           const std::string& what);

// The whole decoded text of a bible.data file. IoError naming the file and the field or block
// when the file is missing (saying which package installs it), truncated or not in the format
// above.
std::string read_bible_data(const std::string& path = kBibleDataPath);

struct BibleVerse {
  std::string book;  // the file's abbreviation: "Ge", "Exo", "1Sa", "Mat", "Rev"
  std::int64_t chapter = 0;
  std::int64_t verse = 0;
  std::string text;
};

struct Bible {
  std::string title;               // the first line
  std::vector<BibleVerse> verses;  // in the book order of the file
  std::vector<std::string> books;  // abbreviations in order of first appearance (66)
};

// Splits decoded text into verses. IoError naming origin and the line number for a line that is
// not "<book><chapter>:<verse> <text>".
Bible parse_bible(const std::string& text, const std::string& origin);

// read_bible_data then parse_bible.
Bible load_bible(const std::string& path = kBibleDataPath);

}  // namespace tapegrad::examples
