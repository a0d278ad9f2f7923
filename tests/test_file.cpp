// io file: durable atomic writes (io::write_file_atomic and its pieces), the number formatter and the
// error-message builder.

#include <doctest/doctest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/format.h"
#include "tapegrad/io/file.h"
#include "tapegrad/io/hash.h"
#include "testing.h"

using namespace tapegrad;
using testing::TempDir;

namespace {

// Caps the size of files this process writes (RLIMIT_FSIZE) while in scope, with SIGXFSZ ignored so
// that a write past the cap fails with EFBIG instead of ending the process.
class FileSizeCap {
 public:
  explicit FileSizeCap(rlim_t bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved_) == 0);
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit cap = saved_;
    cap.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &cap) == 0);
  }
  ~FileSizeCap() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    ::signal(SIGXFSZ, old_handler_);
  }
  FileSizeCap(const FileSizeCap&) = delete;
  FileSizeCap& operator=(const FileSizeCap&) = delete;

 private:
  rlimit saved_{};
  void (*old_handler_)(int) = nullptr;
};

}  // namespace

TEST_CASE("io file: write_file_atomic replaces the file and leaves no temporary file") {
  TempDir dir;
  const std::string path = dir.file("a.txt");
  io::write_file_atomic(path, "first");
  CHECK(testing::read_text(path) == "first");
  io::write_file_atomic(path, std::vector<std::string_view>{"sec", "", "ond"});
  CHECK(testing::read_text(path) == "second");
  io::write_file_atomic(path, "");
  CHECK(testing::read_text(path).empty());
  CHECK(dir.count_files() == 1);
  struct stat info {};
  REQUIRE(::stat(path.c_str(), &info) == 0);
  CHECK((info.st_mode & 0644) == 0644);  // readable like any file the program writes
}

TEST_CASE("io file: a write that fails midway keeps the old file byte for byte and removes the temporary file") {
  TempDir dir;
  const std::string path = dir.file("keep.txt");
  io::write_file_atomic(path, "old contents");
  {
    const FileSizeCap cap(64);
    CHECK_THROWS_WITH_AS(io::write_file_atomic(path, std::string(1000, 'x')),
                         doctest::Contains(("cannot write " + path + ".tmp.").c_str()), IoError);
    CHECK_THROWS_WITH_AS(io::write_file_atomic(path, std::string(1000, 'x')), doctest::Contains("File too large"),
                         IoError);
  }
  CHECK(testing::read_text(path) == "old contents");
  CHECK(dir.count_files() == 1);
}

TEST_CASE("io file: failures name the file and the system's reason") {
  TempDir dir;
  const std::string missing = dir.file("no/such/dir/x.txt");
  CHECK_THROWS_WITH_AS(io::write_file_atomic(missing, "x"),
                       doctest::Contains(("cannot create " + missing + ".tmp.").c_str()), IoError);
  CHECK_THROWS_WITH_AS(io::write_file_atomic(missing, "x"), doctest::Contains("No such file or directory"), IoError);
  // The target is a non-empty directory: the temporary file is written, the rename fails, and is removed.
  const std::string sub = dir.file("sub");
  REQUIRE(::mkdir(sub.c_str(), 0755) == 0);
  testing::write_text(sub + "/inside", "keep");
  CHECK_THROWS_WITH_AS(io::write_file_atomic(sub, "x"), doctest::Contains(("to " + sub + ": ").c_str()), IoError);
  CHECK(dir.count_files() == 1);
  CHECK(testing::read_text(sub + "/inside") == "keep");
  CHECK_THROWS_WITH_AS(io::write_file_synced(missing, "x"), doctest::Contains(("cannot create " + missing).c_str()),
                       IoError);
  CHECK_THROWS_WITH_AS(io::sync_directory(missing), doctest::Contains(missing.c_str()), IoError);
  CHECK_THROWS_WITH_AS(
      io::rename_path(missing, dir.file("b")),
      doctest::Contains(("cannot rename " + missing + " to " + dir.file("b") + ": No such file").c_str()), IoError);
  CHECK_THROWS_WITH_AS(io::write_file_atomic("", "x"), "cannot write '': the path names no file", IoError);
  CHECK_THROWS_WITH_AS(io::write_file_atomic(sub + "/", "x"),
                       ("cannot write '" + sub + "/': the path names no file").c_str(), IoError);
  CHECK(dir.count_files() == 1);  // nothing written by either, in the directory or in sub
  CHECK(std::distance(std::filesystem::directory_iterator(sub), std::filesystem::directory_iterator()) == 1);
  CHECK(io::parent_directory("a/b/c.txt") == "a/b");
  CHECK(io::parent_directory("c.txt") == ".");
  CHECK(io::parent_directory("/c.txt") == "/");
}

TEST_CASE("format: shortest round-trip text, fixed, significant and scientific digits") {
  CHECK(format_number(0.1) == "0.1");
  CHECK(format_number(2.0) == "2");
  CHECK(format_number(-1.5) == "-1.5");
  CHECK(format_number(1e-05) == "1e-05");
  CHECK(format_number(123456789012.0) == "123456789012");
  CHECK(format_number(1.0 / 3.0) == "0.3333333333333333");
  for (const double v : {0.1, 1.0 / 3.0, 6.02214076e23, 5e-324, std::numeric_limits<double>::max()})
    CHECK(std::strtod(format_number(v).c_str(), nullptr) == v);
  CHECK(format_number(std::numeric_limits<double>::quiet_NaN()) == "nan");
  CHECK(format_number(-std::numeric_limits<double>::quiet_NaN()) == "-nan");
  CHECK(format_number(std::numeric_limits<double>::infinity()) == "inf");
  CHECK(format_number(-std::numeric_limits<double>::infinity()) == "-inf");

  CHECK(format_fixed(0.98765, 3) == "0.988");
  CHECK(format_fixed(2.0, 2) == "2.00");
  CHECK(format_fixed(1e300, 0).size() == 301);
  CHECK(format_significant(0.693147, 4) == "0.6931");
  CHECK(format_significant(123456.0, 4) == "1.235e+05");
  CHECK(format_significant(2.0, 4) == "2");
  CHECK(format_scientific(0.001, 2) == "1.00e-03");
  CHECK(format_scientific(std::numeric_limits<double>::infinity(), 2) == "inf");
  CHECK_THROWS_WITH_AS(format_fixed(1.0, -1), "format_fixed: digits must be >= 0, got -1", ValueError);
}

TEST_CASE("message: strings, characters and numbers concatenated, numbers as the formatter writes them") {
  const std::string name = "topk";
  const std::string_view what = "axis";
  const std::int64_t k = -3;
  const std::size_t n = 18446744073709551615ull;
  const unsigned char byte = 7;
  CHECK(message(name, ": k = ", k, " is outside the ", what, "'s ", n, " elements") ==
        "topk: k = -3 is outside the axis's 18446744073709551615 elements");
  CHECK(message("eps ", 1e-05, ", lr ", 0.1F, ", scale ", 2.0, ", ", std::numeric_limits<double>::quiet_NaN(), " ",
                -std::numeric_limits<float>::infinity()) == "eps 1e-05, lr 0.1, scale 2, nan -inf");
  CHECK(message('(', byte, ')', ' ', true, '/', false) == "(7) true/false");
  CHECK(message() == "");
  CHECK(message(format_fixed(0.98765, 2)) == "0.99");
}

TEST_CASE("fnv1a: the published 64-bit test vectors, and numbers as single steps") {
  CHECK(io::Fnv1a().value() == 0xcbf29ce484222325ull);
  io::Fnv1a a;
  a.add("a");
  CHECK(a.value() == 0xaf63dc4c8601ec8cull);
  io::Fnv1a foobar;
  foobar.add("foobar");
  CHECK(foobar.value() == 0x85944171f73967e8ull);
  // A byte added as a number is the same step as the byte in a string.
  io::Fnv1a as_number;
  as_number.add(std::uint64_t{'a'});
  CHECK(as_number.value() == a.value());
}
