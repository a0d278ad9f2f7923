// The King James Bible reader (examples/common/kjv.h) and the language model's corpus split
// (examples/language_model/corpus.h). The reference is Debian's own reader, /usr/bin/bible
// (package bible-kjv, installed by scripts/install-deps.sh with the text).

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "examples/common/kjv.h"
#include "examples/language_model/corpus.h"
#include "tapegrad/autograd/error.h"
#include "tests/testing.h"

using namespace tapegrad;
using namespace tapegrad::examples;

namespace {

// Packs codes of `width` bits least significant bit first, as compress(1) writes them.
std::string pack_codes(const std::vector<std::uint32_t>& codes, int width) {
  std::string out;
  std::uint64_t buffer = 0;
  int bits = 0;
  for (std::uint32_t c : codes) {
    buffer |= std::uint64_t{c} << bits;
    bits += width;
    while (bits >= 8) {
      out.push_back(static_cast<char>(buffer & 0xff));
      buffer >>= 8;
      bits -= 8;
    }
  }
  if (bits > 0) out.push_back(static_cast<char>(buffer & 0xff));
  return out;
}

std::string run_command(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  REQUIRE(pipe != nullptr);
  std::string out;
  char buffer[1 << 16];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe.get())) > 0) out.append(buffer, n);
  return out;
}

const Bible& bible() {
  static const Bible b = load_bible();
  return b;
}

}  // namespace

TEST_CASE("kjv: LZW codes decode, including a code defined by the code itself (KwKwK)") {
  // "ABABABA": A, B, 257 = AB, 259 = ABA (not yet defined when read: the previous string plus its first byte).
  CHECK(lzw_decompress(pack_codes({65, 66, 257, 259}, 9), 16, true, 100, "t") == "ABABABA");
  // Without block mode the first free code is 256.
  CHECK(lzw_decompress(pack_codes({65, 66, 256, 258}, 9), 16, false, 100, "t") == "ABABABA");
  CHECK_THROWS_WITH_AS(lzw_decompress(pack_codes({65, 300}, 9), 16, true, 100, "s.Z"),
                       "s.Z: corrupt LZW stream: code 300 is not defined yet (next free 257)", IoError);
  CHECK_THROWS_WITH_AS(lzw_decompress(pack_codes({65, 66, 257, 259}, 9), 16, true, 5, "s.Z"),
                       "s.Z: LZW stream decodes to more than 5 bytes", IoError);
  CHECK_THROWS_AS(lzw_decompress("", 17, true, 5, "s.Z"), IoError);
}

TEST_CASE("kjv: bible.data decodes to the text Debian's reader prints, verse for verse") {
  const Bible& b = bible();
  CHECK(b.title.rfind("Holy Bible, Authorized (King James) Version.", 0) == 0);
  CHECK(b.books.size() == 66);
  CHECK(b.books.front() == "Ge");
  CHECK(b.books.back() == "Rev");
  REQUIRE(b.verses.size() == 31102);
  CHECK(b.verses[0].text == "In the beginning God created the heaven and the earth.");
  CHECK(b.verses.back().book == "Rev");
  CHECK(b.verses.back().chapter == 22);
  CHECK(b.verses.back().verse == 21);

  // bible -f prints "<book><chapter>:<verse> <text>" per verse.
  REQUIRE(std::filesystem::exists("/usr/bin/bible"));
  const std::string reference = run_command("/usr/bin/bible -f gen1:1-rev22:21 2>/dev/null");
  std::string ours;
  for (const BibleVerse& v : b.verses)
    ours += v.book + std::to_string(v.chapter) + ":" + std::to_string(v.verse) + " " + v.text + "\n";
  // The reader separates chapters with blank lines; compare the verse lines.
  std::string reference_verses;
  std::size_t start = 0;
  while (start < reference.size()) {
    std::size_t end = reference.find('\n', start);
    if (end == std::string::npos) end = reference.size();
    if (end > start) reference_verses += reference.substr(start, end - start) + "\n";
    start = end + 1;
  }
  CHECK(ours.size() == reference_verses.size());
  CHECK(ours == reference_verses);
}

TEST_CASE("kjv: a damaged or missing bible.data is an IoError naming the file and what is wrong") {
  testing::TempDir dir;
  const std::string missing = (dir.path / "none.data").string();
  CHECK_THROWS_WITH_AS(read_bible_data(missing), doctest::Contains("bible-kjv-text package"), IoError);
  const std::string bytes = testing::read_text(kBibleDataPath);
  const auto write = [&](const std::string& name, const std::string& contents) {
    const std::string path = (dir.path / name).string();
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  };
  CHECK_THROWS_WITH_AS(read_bible_data(write("magic.data", "EC03" + bytes.substr(4))),
                       doctest::Contains("does not start with \"EC02Compressed Data File\""), IoError);
  CHECK_THROWS_WITH_AS(read_bible_data(write("short.data", bytes.substr(0, bytes.size() - 1000))),
                       doctest::Contains("block 67 spans"), IoError);
  std::string flipped = bytes;
  flipped[400] = static_cast<char>(flipped[400] ^ 0x5a);
  CHECK_THROWS_WITH_AS(read_bible_data(write("flipped.data", flipped)), doctest::Contains("block 0"), IoError);
  CHECK_THROWS_WITH_AS(parse_bible("title\nGe1:1 ok\nnot a verse\n", "x.txt"),
                       "x.txt: line 3 is not \"<book><chapter>:<verse> <text>\": \"not a verse\"", IoError);
}

TEST_CASE("kjv: the language model's corpus holds out whole books, as bytes") {
  const LmCorpus corpus = kjv_corpus(bible(), kDefaultHeldOutBooks);
  CHECK(corpus.train_verses + corpus.heldout_verses == 31102);
  const double share = static_cast<double>(corpus.heldout_text.size()) /
                       static_cast<double>(corpus.heldout_text.size() + corpus.train_text.size());
  CHECK(share > 0.04);
  CHECK(share < 0.06);
  // Mark 1:1 is held out, Matthew's first verse is trained on.
  CHECK(corpus.heldout_text.find("The beginning of the gospel of Jesus Christ, the Son of God;\n") !=
        std::string::npos);
  CHECK(corpus.train_text.find("The book of the generation of Jesus Christ") != std::string::npos);
  CHECK(corpus.train_text.find("The beginning of the gospel of Jesus Christ, the Son of God;") == std::string::npos);
  const std::vector<std::int64_t> ids = byte_tokens("Ab\n");
  CHECK(ids == std::vector<std::int64_t>{65, 98, 10});
  CHECK(bytes_text(ids) == "Ab\n");
  CHECK_THROWS_AS(bytes_text({300}), ValueError);
  CHECK(split_books(" Ruth, Prv ,,Mark") == std::vector<std::string>{"Ruth", "Prv", "Mark"});
  CHECK_THROWS_WITH_AS(kjv_corpus(bible(), {"Mark", "Gen"}),
                       doctest::Contains("held-out book \"Gen\" is not in the text; its books are: Ge Exo"),
                       ValueError);
}
