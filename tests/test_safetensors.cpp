// checkpoint: safetensors writing and reading, atomic writes, rejection of corrupt files.

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/generator.h"
#include "tapegrad/io/safetensors.h"
#include "tapegrad/nn/module.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_values;
using tapegrad::testing::TempDir;

namespace {

// A file made by hand: length field, header text, data bytes.
std::string make_file(const std::string& header, const std::string& data) {
  const std::uint64_t n = header.size();
  std::string out(8, '\0');
  std::memcpy(&out[0], &n, 8);
  return out + header + data;
}

class Tiny : public nn::Module {
 public:
  Tiny() {
    w_ = register_parameter("w", tensor({{1.0, 2.0}, {3.0, 4.0}}));
    b_ = register_buffer("count", tensor({7}, kInt64));
  }
  Tensor w_, b_;
};

}  // namespace

TEST_CASE("checkpoint: round trip of every dtype, 0-d, empty and non-contiguous tensors") {
  TempDir dir;
  const std::string path = dir.file("a.safetensors");
  const Tensor f32 = tensor({{1.5, -2.0, 3.25}, {0.0, 1e-3, -7.0}});
  const Tensor f64 = tensor({0.1, -0.2}, kFloat64);
  const Tensor i64 = tensor({-3, 0, 9000000000LL}, kInt64);
  const Tensor b = from_vector(std::vector<bool>{true, false, true}, {3});
  const Tensor zero_d = scalar_tensor(2.5, kFloat64);
  const Tensor empty_t = zeros({0, 3});
  const Tensor transposed = f32.transpose(0, 1);  // (3, 2), not contiguous
  io::save_safetensors(
      path,
      {{"f32", f32}, {"f64", f64}, {"i64", i64}, {"b", b}, {"zero_d", zero_d}, {"empty", empty_t}, {"t", transposed}},
      {{"step", "12"}});
  CHECK(dir.count_files() == 1);  // no temp file left behind
  const io::SafetensorsFile file = io::load_safetensors(path);
  REQUIRE(file.tensors.size() == 7);
  // The data lies in order of decreasing element size (stable), which is the loader's order too.
  const std::vector<std::string> names = {"f64", "i64", "zero_d", "f32", "empty", "t", "b"};
  std::map<std::string, Tensor> got;
  for (std::size_t i = 0; i < names.size(); ++i) {
    CHECK(file.tensors[i].first == names[i]);
    got[file.tensors[i].first] = file.tensors[i].second;
  }
  CHECK(file.metadata.at("format") == "pt");
  CHECK(file.metadata.at("step") == "12");
  check_values(got["f32"], {1.5, -2.0, 3.25, 0.0, 1e-3, -7.0});
  CHECK(got["f32"].dtype() == kFloat32);
  CHECK(got["f32"].shape() == Shape({2, 3}));
  CHECK(got["f64"].dtype() == kFloat64);
  CHECK(got["f64"].to_vector<double>() == std::vector<double>{0.1, -0.2});  // bit-exact
  CHECK(got["i64"].to_vector<std::int64_t>() == std::vector<std::int64_t>{-3, 0, 9000000000LL});
  CHECK(got["b"].dtype() == kBool);
  CHECK(got["b"].to(kInt64).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0, 1});
  CHECK(got["zero_d"].shape().size() == 0);
  CHECK(got["zero_d"].item<double>() == 2.5);
  CHECK(got["empty"].shape() == Shape({0, 3}));
  CHECK(got["t"].shape() == Shape({3, 2}));
  check_values(got["t"], {1.5, 0.0, -2.0, 1e-3, 3.25, -7.0});
  // The header length is a multiple of 8, its entries keep the given order, and every tensor's data
  // starts at a multiple of its element size.
  const std::string bytes = testing::read_text(path);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0);
  const nlohmann::ordered_json header = nlohmann::ordered_json::parse(bytes.substr(8, n));
  std::vector<std::string> header_order;
  for (const auto& item : header.items()) {
    const std::string& name = item.key();
    const auto& entry = item.value();
    if (name == "__metadata__") continue;
    header_order.push_back(name);
    const std::string dtype = entry.at("dtype").get<std::string>();
    const std::uint64_t size = dtype == "BOOL" ? 1 : dtype == "F32" ? 4 : 8;
    CAPTURE(name);
    CHECK(entry.at("data_offsets").at(0).get<std::uint64_t>() % size == 0);
  }
  CHECK(header_order == std::vector<std::string>{"f32", "f64", "i64", "b", "zero_d", "empty", "t"});
}

TEST_CASE("checkpoint: a module's state_dict round trip through a safetensors file") {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  Tiny a;
  io::save_safetensors(path, a.state_dict());
  Tiny b;
  {
    NoGradGuard no_grad;
    b.w_.fill_(0.0);
  }
  b.b_.fill_(0);
  b.load_state_dict(io::load_safetensors(path).tensors);
  check_values(b.w_, {1.0, 2.0, 3.0, 4.0});
  CHECK(b.b_.to_vector<std::int64_t>() == std::vector<std::int64_t>{7});
  CHECK(b.w_.requires_grad());
  // NamedTensors target: a shape mismatch is rejected and changes nothing.
  const Tensor w = zeros({2, 2});
  const Tensor wrong = zeros({3});
  io::load_into(NamedTensors{{"w", w}, {"count", zeros({1}, kInt64)}}, path);
  check_values(w, {1.0, 2.0, 3.0, 4.0});
  CHECK_THROWS_AS(io::load_into(NamedTensors{{"w", wrong}, {"count", zeros({1}, kInt64)}}, path), ShapeError);
  CHECK_THROWS_AS(io::load_into(NamedTensors{{"w", w}}, path), ValueError);  // strict: "count" unexpected
  CHECK_NOTHROW(io::load_into(NamedTensors{{"w", w}}, path, false));
  CHECK_THROWS_WITH_AS(io::load_into(NamedTensors{{"w", Tensor()}, {"count", zeros({1}, kInt64)}}, path),
                       doctest::Contains(("load_into: " + path + ": the target's tensor 'w' is undefined").c_str()),
                       ValueError);
}

TEST_CASE("checkpoint: duplicate names are refused before anything is written") {
  TempDir dir;
  const std::string path = dir.file("d.safetensors");
  CHECK_THROWS_WITH_AS(io::save_safetensors(path, {{"x", zeros({1})}, {"x", zeros({2})}}),
                       doctest::Contains("duplicate tensor name 'x'"), ValueError);
  CHECK(dir.count_files() == 0);
}

TEST_CASE("checkpoint: a header load_safetensors would refuse is refused on save, before anything is written") {
  TempDir dir;
  const std::string path = dir.file("h.safetensors");
  const io::Metadata big{{"notes", std::string(100000000, 'a')}};  // past the 100 MB header limit with the rest
  CHECK_THROWS_WITH_AS(io::save_safetensors(path, {{"x", zeros({1})}}, big),
                       doctest::Contains("save_safetensors: the header (names, shapes, offsets and metadata) is "),
                       ValueError);
  CHECK(dir.count_files() == 0);
}

TEST_CASE("checkpoint: failed writes throw IoError, leave no temp file and keep the old checkpoint") {
  TempDir dir;
  // Non-existent directory.
  const std::string missing = dir.file("no/such/dir/x.safetensors");
  CHECK_THROWS_WITH_AS(io::save_safetensors(missing, {{"x", zeros({1})}}), doctest::Contains(missing.c_str()), IoError);
  CHECK(dir.count_files() == 0);
  // An existing checkpoint survives a save that fails before renaming: the target is a directory,
  // so the final rename fails after the temp file was fully written.
  const std::string good = dir.file("good.safetensors");
  io::save_safetensors(good, {{"x", tensor({1.0, 2.0})}});
  const std::string before = testing::read_text(good);
  const std::string as_dir = dir.file("sub");
  REQUIRE(::mkdir(as_dir.c_str(), 0755) == 0);
  testing::write_text(as_dir + "/inside", "keep");  // non-empty, so rename over it fails
  CHECK_THROWS_WITH_AS(io::save_safetensors(as_dir, {{"x", zeros({1})}}), doctest::Contains(as_dir.c_str()), IoError);
  CHECK(dir.count_files() == 2);  // good.safetensors and sub: no temp file
  // A failing overwrite of good (duplicate names) leaves it byte-identical.
  CHECK_THROWS_AS(io::save_safetensors(good, {{"x", zeros({1})}, {"x", zeros({1})}}), ValueError);
  CHECK(testing::read_text(good) == before);
  // A successful overwrite replaces it.
  io::save_safetensors(good, {{"y", tensor({3.0})}});
  CHECK(io::load_safetensors(good).tensors.at(0).first == "y");
}

TEST_CASE("checkpoint: hand-made corrupt files are rejected with messages naming the problem") {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  auto check_bad = [&](const std::string& bytes, const std::string& expected) {
    testing::write_text(path, bytes);
    INFO("expected message containing: " << expected);
    CHECK_THROWS_WITH_AS(io::load_safetensors(path), doctest::Contains(expected.c_str()), IoError);
    CHECK_THROWS_WITH_AS(io::load_safetensors(path), doctest::Contains(path.c_str()), IoError);
  };
  const std::string f32x2(8, '\0');  // two float32 zeros
  // A valid file first, so the helper is known to build readable files.
  testing::write_text(path, make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", f32x2));
  CHECK(io::load_safetensors(path).tensors.at(0).second.shape() == Shape({2}));

  check_bad("abc", "file is 3 bytes, shorter than the 8-byte header length");
  {
    std::string huge(8, '\0');
    const std::uint64_t n = 200000000;
    std::memcpy(&huge[0], &n, 8);
    check_bad(huge, "header length 200000000 exceeds the limit 100000000");
  }
  {
    std::string f = make_file("{}", "");
    f[0] = 50;  // claims 50 header bytes, 2 present
    check_bad(f, "header length 50 exceeds the 2 bytes after the length field");
  }
  check_bad(make_file("{\"a\":", ""), "header: not valid JSON");
  check_bad(make_file("[1,2]", ""), "header is not a JSON object");
  check_bad(make_file(R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", std::string(4, '\0')),
            "tensor 'a': unsupported dtype 'F16' (expected F32, F64, BF16, I64 or BOOL)");
  check_bad(make_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", f32x2),
            "tensor 'a': shape [-2] has an entry that is not a non-negative integer");
  check_bad(make_file(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,8]}})", f32x2),
            "shape [1.5] has an entry");
  check_bad(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", f32x2),
            "data_offsets [0] is not two non-negative integers");
  check_bad(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,"8"]}})", f32x2),
            "is not two non-negative integers");
  check_bad(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", f32x2),
            "data_offsets [8,0] end < begin");
  check_bad(make_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", f32x2),
            "span 8 bytes, but shape [3] of F32 needs 12");
  check_bad(
      make_file(R"({"a":{"dtype":"F64","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}})", f32x2),
      "is too large");
  check_bad(
      make_file(
          R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
          std::string(12, '\0')),
      "tensor 'b': data_offsets begin 8 but the previous tensor ends at 4 (gap)");
  check_bad(
      make_file(
          R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
          f32x2),
      "(overlap)");
  check_bad(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", f32x2 + "xx"),
            "tensors cover 8 bytes of data but the file holds 10");
  check_bad(
      make_file(
          R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
          f32x2),
      "header: duplicate key \"a\" in one object (at a)");
  // An empty first axis does not make any shape acceptable: the strides of (0, 2^62, 2^62)
  // overflow int64 (before, undefined behaviour in shape.h; loaded silently in Release).
  check_bad(
      make_file(R"({"a":{"dtype":"F32","shape":[0,4611686018427387904,4611686018427387904],"data_offsets":[0,0]}})",
                ""),
      "tensor 'a': shape [0,4611686018427387904,4611686018427387904] is too large");
  check_bad(make_file(R"({"a":{"dtype":"F32","shape":[1e400],"data_offsets":[0,0]}})", ""),
            "header: number overflow parsing '1e400' (at a.shape[0])");
  check_bad(make_file(std::string(100000, '[') + std::string(100000, ']'), ""), "header: JSON nested more than 64");
  check_bad(make_file(R"({"a":{"dtype":"F32","shape":[2],"shape":[1],"data_offsets":[0,8]}})", f32x2),
            "header: duplicate key \"shape\" in one object (at a.shape)");
  check_bad(make_file(R"({"__metadata__":{"k":3}})", ""), "__metadata__ value for 'k' is not a string");
  check_bad(make_file(R"({"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", std::string("\x01\x05", 2)),
            "BOOL element 1 has byte value 5");
  CHECK_THROWS_WITH_AS(io::load_safetensors(dir.file("absent")), doctest::Contains("cannot open"), IoError);
  CHECK_THROWS_WITH_AS(io::load_safetensors(dir.str()),
                       ("load_safetensors: cannot read " + dir.str() + ": it is a directory, not a file").c_str(),
                       IoError);
}

TEST_CASE("checkpoint: every tensor carries a checksum, and a flipped bit anywhere in the data is caught") {
  TempDir dir;
  const std::string path = dir.file("c.safetensors");
  Generator gen(3);
  io::save_safetensors(path,
                       {{"w", randn({4, 5}, gen)},
                        {"d", randn({3}, gen).to(kFloat64)},
                        {"i", tensor({1, -2, 3}, kInt64)},
                        {"m", from_vector(std::vector<bool>{true, false}, {2})},
                        {"e", zeros({0, 2})}},
                       {{"step", "7"}});
  const io::SafetensorsFile loaded = io::load_safetensors(path);
  // The checksums are the format's own: not part of the metadata a caller sees.
  CHECK(loaded.metadata == io::Metadata{{"format", "pt"}, {"step", "7"}});
  const std::string good = testing::read_text(path);
  std::uint64_t n = 0;
  std::memcpy(&n, good.data(), 8);
  const std::string header = good.substr(8, n);
  for (const char* name : {"w", "d", "i", "m", "e"})
    CHECK(header.find(std::string("\"tapegrad.crc32.") + name + "\":\"") != std::string::npos);
  // Every single-bit flip in the data region: an IoError naming the tensor (a flip that makes a BOOL
  // byte invalid may be reported as that instead), never changed values.
  const std::string flipped = dir.file("flipped.safetensors");
  int caught = 0;
  for (std::size_t byte = 8 + n; byte < good.size(); ++byte)
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = good;
      bad[byte] = static_cast<char>(bad[byte] ^ (1 << bit));
      testing::write_text(flipped, bad);
      try {
        io::load_safetensors(flipped);
        FAIL("a flip at byte " << byte << " bit " << bit << " loaded");
      } catch (const IoError& e) {
        const std::string message = e.what();
        if (message.find("checksum mismatch") != std::string::npos) ++caught;
        else CHECK_MESSAGE(message.find("BOOL element") != std::string::npos, message);
      }
    }
  CHECK(caught >= static_cast<int>(good.size() - 8 - n) * 8 - 16);  // all but the BOOL bytes' flips
  // The message names the file and the tensor.
  std::string bad = good;
  bad[8 + n] = static_cast<char>(bad[8 + n] ^ 1);  // the first data byte: "w" or "d" (float64 goes first)
  testing::write_text(flipped, bad);
  CHECK_THROWS_WITH_AS(io::load_safetensors(flipped),
                       doctest::Contains(("load_safetensors: " + flipped + ": tensor 'd': checksum mismatch").c_str()),
                       IoError);
}

TEST_CASE("checkpoint: checksum entries must match the tensors, and the prefix is reserved") {
  TempDir dir;
  const std::string f32x2(8, '\0');
  auto check_bad = [&](const std::string& bytes, const std::string& expected) {
    const std::string path = dir.file("bad.safetensors");
    testing::write_text(path, bytes);
    CHECK_THROWS_WITH_AS(io::load_safetensors(path), doctest::Contains(expected.c_str()), IoError);
  };
  const std::string entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  check_bad(make_file(R"({"__metadata__":{"tapegrad.crc32.a":"00000000"},)" + entry + "}", f32x2),
            "tensor 'a': checksum mismatch: the metadata says CRC-32 \"00000000\", the data has");
  check_bad(make_file(R"({"__metadata__":{"tapegrad.crc32.b":"00000000"},)" + entry + "}", f32x2),
            "tensor 'a' has no checksum, while the file has checksums for 1 tensors");
  // Files from other writers have no checksums and load as before.
  const std::string path = dir.file("plain.safetensors");
  testing::write_text(path, make_file("{" + entry + "}", f32x2));
  CHECK(io::load_safetensors(path).tensors.size() == 1);
  CHECK_THROWS_WITH_AS(io::save_safetensors(path, {{"a", zeros({2})}}, {{"tapegrad.crc32.a", "x"}}),
                       doctest::Contains("metadata key 'tapegrad.crc32.a' uses the reserved prefix"), ValueError);
}

TEST_CASE("checkpoint: every truncation of a valid file is rejected") {
  TempDir dir;
  const std::string path = dir.file("full.safetensors");
  io::save_safetensors(path, {{"w", tensor({{1.0, 2.0}, {3.0, 4.0}})},
                              {"n", tensor({5}, kInt64)},
                              {"m", from_vector(std::vector<bool>{true}, {1})}});
  const std::string full = testing::read_text(path);
  REQUIRE(full.size() > 16);
  const std::string cut = dir.file("cut.safetensors");
  for (std::size_t len = 0; len < full.size(); ++len) {
    testing::write_text(cut, full.substr(0, len));
    INFO("truncated to " << len << " of " << full.size() << " bytes");
    CHECK_THROWS_AS(io::load_safetensors(cut), IoError);
  }
  testing::write_text(cut, full);
  CHECK(io::load_safetensors(cut).tensors.size() == 3);
}

// Writes the file that tests/read_safetensors.py checks (CTest runs the script after this test).
TEST_CASE("checkpoint: write the file for the independent Python reader") {
  // The CTest fixture sets the path; run alone, the file goes to a temp directory and is read back here.
  TempDir dir;
  const char* env = std::getenv("TAPEGRAD_SAFETENSORS_OUT");
  const std::string out = env != nullptr ? std::string(env) : dir.file("interop.safetensors");
  const Tensor f32 = tensor({{1.5, -2.0, 3.25}, {0.0, 0.5, -7.0}});
  io::save_safetensors(out,
                       {{"weight", f32.transpose(0, 1)},  // (3, 2) non-contiguous source
                        {"bias", tensor({0.25, -0.125}, kFloat64)},
                        {"steps", tensor({-3, 9000000000LL}, kInt64)},
                        {"mask", from_vector(std::vector<bool>{true, false, true}, {3})},
                        {"scale", scalar_tensor(2.0)},
                        {"nothing", zeros({0, 4})},
                        {"half", tensor({1.0, -2.5, 3.140625, 1.0 / 3.0}).to(kBFloat16)}},
                       {{"step", "42"}});
  const io::SafetensorsFile file = io::load_safetensors(out);
  REQUIRE(file.tensors.size() == 7);
  bool found = false;
  for (const auto& [name, t] : file.tensors)
    if (name == "weight") {
      found = true;
      check_values(t, {1.5, 0.0, -2.0, 0.5, 3.25, -7.0});
    }
  CHECK(found);
}
