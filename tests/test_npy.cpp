// npy: io::save_npy / load_npy and io::save_npz / load_npz. Files NumPy wrote (tests/data/npy, made by
// make_fixtures.py) load with every value; what tapegrad writes is byte for byte np.save's; hand-made
// headers and ZIP archives (a small independent ZIP writer below) cover fortran order, byte order, ZIP64
// fields and every rejection. tests/read_npy.py loads the files of the last case with NumPy.

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/io/io.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::TempDir;

namespace {

const std::string kDir = std::string(TAPEGRAD_TEST_DATA_DIR) + "/npy";

// The bytes of a contiguous copy of t: two tensors are the same when dtype, shape and these agree
// (bit for bit, so -0.0 differs from 0.0).
std::string bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  const std::size_t n = static_cast<std::size_t>(c.numel()) * element_size(c.dtype());
  if (n == 0) return "";
  const void* p = dispatch_all(c.dtype(), [&](auto tag) -> const void* {
    using T = decltype(tag);
    return c.data_ptr<T>();
  });
  return std::string(static_cast<const char*>(p), n);
}

void check_same(const Tensor& got, const Tensor& expected) {
  CHECK(got.dtype() == expected.dtype());
  REQUIRE(got.shape() == expected.shape());
  CHECK(bytes_of(got) == bytes_of(expected));
}

template <class T>
std::string le(T v) {
  std::string out(sizeof(T), '\0');
  std::memcpy(&out[0], &v, sizeof(T));
  return out;
}

// A .npy file made by hand: the magic, the version, the header length and dict as given, then data.
std::string npy_file(const std::string& dict, const std::string& data, int major = 1) {
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  const std::string header = dict + "\n";
  out += major == 1 ? le<std::uint16_t>(static_cast<std::uint16_t>(header.size()))
                    : le<std::uint32_t>(static_cast<std::uint32_t>(header.size()));
  return out + header + data;
}

std::string npy_dict(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
}

// text with its first `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// ---------------------------------------------------------------- an independent ZIP writer

std::string deflate_bytes(const std::string& data) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&zs, data.size()) + 16, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(&out[0]);
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

struct ZipMember {
  std::string name;
  std::string data;          // the member's contents
  std::uint16_t method = 0;  // 8 deflates data here; any other value stores it as it is
  std::uint16_t flags = 0;
  bool zip64 = false;                // central directory sizes and offset 0xFFFFFFFF, the values in a ZIP64 extra field
  bool zip64_extra = true;           // with zip64: whether the extra field is there at all
  std::optional<std::uint32_t> crc;  // the CRC-32 stated (default: the right one)
  std::optional<std::uint64_t> size;  // the uncompressed size stated (default: the right one)
  std::optional<std::string> raw;     // the bytes stored, instead of data (deflated when method is 8)
};

ZipMember member(const std::string& name, const std::string& data, std::uint16_t method = 0) {
  ZipMember m;
  m.name = name;
  m.data = data;
  m.method = method;
  return m;
}

// A ZIP archive of the members (a classic end record; the local headers state the real sizes).
std::string zip_archive(const std::vector<ZipMember>& members) {
  std::string body, directory;
  for (const ZipMember& m : members) {
    const std::string stored = m.raw ? *m.raw : m.method == 8 ? deflate_bytes(m.data) : m.data;
    const std::uint32_t crc =
        m.crc ? *m.crc
              : static_cast<std::uint32_t>(::crc32(0L, reinterpret_cast<const Bytef*>(m.data.data()), m.data.size()));
    const std::uint64_t size = m.size ? *m.size : m.data.size();
    const std::uint64_t offset = body.size();
    std::string fields = le<std::uint16_t>(20) + le<std::uint16_t>(m.flags) + le<std::uint16_t>(m.method) +
                         le<std::uint32_t>(0) + le<std::uint32_t>(crc);
    body += le<std::uint32_t>(0x04034b50) + fields + le<std::uint32_t>(static_cast<std::uint32_t>(stored.size())) +
            le<std::uint32_t>(static_cast<std::uint32_t>(size)) + le<std::uint16_t>(m.name.size()) +
            le<std::uint16_t>(0) + m.name + stored;
    std::string extra;
    if (m.zip64 && m.zip64_extra)
      extra = le<std::uint16_t>(1) + le<std::uint16_t>(24) + le<std::uint64_t>(size) +
              le<std::uint64_t>(stored.size()) + le<std::uint64_t>(offset);
    const std::uint32_t full = 0xffffffff;
    directory += le<std::uint32_t>(0x02014b50) + le<std::uint16_t>(0x031e) + fields +
                 le<std::uint32_t>(m.zip64 ? full : static_cast<std::uint32_t>(stored.size())) +
                 le<std::uint32_t>(m.zip64 ? full : static_cast<std::uint32_t>(size)) +
                 le<std::uint16_t>(m.name.size()) + le<std::uint16_t>(extra.size()) + le<std::uint16_t>(0) +
                 le<std::uint16_t>(0) + le<std::uint16_t>(0) + le<std::uint32_t>(0) +
                 le<std::uint32_t>(m.zip64 ? full : static_cast<std::uint32_t>(offset)) + m.name + extra;
  }
  const std::uint16_t n = static_cast<std::uint16_t>(members.size());
  return body + directory + le<std::uint32_t>(0x06054b50) + le<std::uint16_t>(0) + le<std::uint16_t>(0) +
         le<std::uint16_t>(n) + le<std::uint16_t>(n) + le<std::uint32_t>(directory.size()) +
         le<std::uint32_t>(body.size()) + le<std::uint16_t>(0);
}

// The arrays of one fixture or member description in values.json.
Tensor expected_tensor(const nlohmann::json& j) {
  const Shape shape(j.at("shape").get<std::vector<std::int64_t>>());
  const std::string dtype = j.at("dtype").get<std::string>();
  const nlohmann::json& values = j.at("values");
  if (dtype == "float32") {
    std::vector<float> v;
    for (const auto& x : values) v.push_back(static_cast<float>(x.get<double>()));  // exact: x is a float32
    return from_vector(v, shape);
  }
  if (dtype == "float64") return from_vector(values.get<std::vector<double>>(), shape);
  if (dtype == "int64") return from_vector(values.get<std::vector<std::int64_t>>(), shape);
  REQUIRE(dtype == "bool");
  return from_vector(values.get<std::vector<bool>>(), shape);
}

nlohmann::json fixture_values() { return nlohmann::json::parse(io::read_file(kDir + "/values.json")); }

// The text of a .npy file's header dict.
std::string header_text(const std::string& file) {
  const std::size_t length_size = file[6] == 1 ? 2 : 4;
  std::uint32_t n = 0;
  std::memcpy(&n, file.data() + 8, length_size);
  return file.substr(8 + length_size, n);
}

// Every byte offset at which `what` occurs in `bytes`.
std::vector<std::size_t> find_all(const std::string& bytes, const std::string& what) {
  std::vector<std::size_t> out;
  for (std::size_t at = bytes.find(what); at != std::string::npos; at = bytes.find(what, at + 1)) out.push_back(at);
  return out;
}

}  // namespace

TEST_CASE("npy: round trip of every dtype, 0-d, empty, non-contiguous and large tensors") {
  TempDir dir;
  Generator gen(5);
  const Tensor f32 = tensor({{1.5, -2.0, 3.25}, {-0.0, 1e-30, -7.0}});
  std::vector<double> big(1000 * 37);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<double>(i) * 0.001 - 3.0;
  const std::vector<std::pair<std::string, Tensor>> cases = {
      {"f32", f32},
      {"f64", tensor({0.1, -0.2, 1e300}, kFloat64)},
      {"i64", tensor({-3, 0, 9000000000LL}, kInt64)},
      {"bool", from_vector(std::vector<bool>{true, false, true, true}, {2, 2})},
      {"scalar_f32", scalar_tensor(2.5)},
      {"scalar_i64", scalar_tensor(-7, kInt64)},
      {"scalar_bool", scalar_tensor(1, kBool)},
      {"empty", zeros({0, 3})},
      {"empty_i64", zeros({4, 0, 2}, kInt64)},
      {"transposed", f32.transpose(0, 1)},                                  // (3, 2) view
      {"strided", randn({6, 8}, gen, kFloat64).slice(1, 1, 8, 3)},          // (6, 3), step 3
      {"expanded", tensor({1, 2, 3}, kInt64).unsqueeze(0).expand({4, 3})},  // stride 0
      {"large", from_vector(big, {1000, 37})},
      {"large_f32_view", randn({37, 1000}, gen).transpose(0, 1)},
      {"rank8", randn({1, 2, 1, 2, 1, 2, 1, 3}, gen)},
  };
  for (const auto& [name, t] : cases) {
    CAPTURE(name);
    const std::string path = dir.file(name + ".npy");
    io::save_npy(path, t);
    const Tensor back = io::load_npy(path);
    check_same(back, t);
    // (Tensor::is_contiguous says no for some empty shapes, e.g. (4, 0, 2): nothing to check there.)
    if (back.numel() > 0) CHECK(back.is_contiguous());
    CHECK(!back.requires_grad());
  }
  CHECK(dir.count_files() == static_cast<int>(cases.size()));  // no temporary file left behind
  // A tensor that requires grad is saved by value.
  const Tensor w = randn({3, 4}, gen).requires_grad_();
  io::save_npy(dir.file("w.npy"), w * 2.0);
  check_same(io::load_npy(dir.file("w.npy")), (w * 2.0).detach());
}

TEST_CASE("npy: the header is byte for byte np.save's, with the data at a multiple of 64") {
  TempDir dir;
  const std::string path = dir.file("a.npy");
  io::save_npy(path, tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}));
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  // NumPy leaves 21 characters, less the digits of the first extent, for the shape to grow, then pads
  // with spaces and ends with '\n' at the next multiple of 64: 10 + 118 = 128 bytes before the data.
  const std::string header = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict + std::string(20, ' ') +
                             std::string(128 - 10 - dict.size() - 20 - 1, ' ') + "\n";
  const std::string file = testing::read_text(path);
  REQUIRE(file.size() == 128 + 24);
  CHECK(file.substr(0, 128) == header);
  float first = 0;
  std::memcpy(&first, file.data() + 128, 4);
  CHECK(first == 1.0f);

  // The dict of other shapes and dtypes, and the alignment, for every rank and first extents of every length.
  const std::vector<std::pair<Tensor, std::string>> dicts = {
      {scalar_tensor(1.0, kFloat64), "{'descr': '<f8', 'fortran_order': False, 'shape': (), }"},
      {zeros({5}, kInt64), "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }"},
      {zeros({0, 4}, kBool), "{'descr': '|b1', 'fortran_order': False, 'shape': (0, 4), }"},
  };
  for (const auto& [t, expected] : dicts) {
    io::save_npy(path, t);
    const std::string text = header_text(testing::read_text(path));
    CHECK(text.substr(0, expected.size()) == expected);
  }
  for (int rank = 0; rank <= kMaxRank; ++rank)
    for (std::int64_t first_extent : {0LL, 1LL, 7LL, 123LL, 100000LL}) {
      std::vector<std::int64_t> shape(static_cast<std::size_t>(rank), 1);
      if (rank > 0) shape[0] = first_extent;
      io::save_npy(path, zeros(Shape(shape)));
      const std::string f = testing::read_text(path);
      const std::string text = header_text(f);
      CAPTURE(text);
      CHECK((10 + text.size()) % 64 == 0);
      CHECK(text.back() == '\n');
      CHECK(f.size() == 10 + text.size() + 4 * static_cast<std::size_t>(Shape(shape).numel()));
      CHECK(io::load_npy(path).shape() == Shape(shape));
    }
  // NumPy's own files: what tapegrad writes for the same array is the same file.
  for (const char* name : {"f32.npy", "i64.npy", "bool.npy", "scalar.npy", "empty.npy"}) {
    CAPTURE(name);
    const std::string theirs = io::read_file(kDir + "/" + name);
    io::save_npy(path, io::load_npy(kDir + "/" + name));
    CHECK(testing::read_text(path) == theirs);
  }
}

TEST_CASE("npy: files NumPy wrote load with every value, every version, byte order and fortran order") {
  const nlohmann::json values = fixture_values();
  int npy_files = 0;
  for (const auto& [name, j] : values.items()) {
    if (name.size() < 4 || name.substr(name.size() - 4) != ".npy") continue;
    CAPTURE(name);
    ++npy_files;
    // The file still has the property it is here for.
    const std::string file = io::read_file(kDir + "/" + name);
    const std::string text = header_text(file);
    CHECK(text.find("'descr': '" + j.at("descr").get<std::string>() + "'") != std::string::npos);
    CHECK(text.find(std::string("'fortran_order': ") + (j.at("fortran_order").get<bool>() ? "True" : "False")) !=
          std::string::npos);
    CHECK(std::to_string(file[6]) + ".0" == j.at("version").get<std::string>());
    const Tensor t = io::load_npy(kDir + "/" + name);
    CHECK(dtype_name(t.dtype()) == j.at("dtype").get<std::string>());
    check_same(t, expected_tensor(j));
  }
  CHECK(npy_files == 12);
  // The fixtures cover what they are meant to.
  CHECK(values.at("f64_fortran.npy").at("fortran_order").get<bool>());
  CHECK(values.at("i32_bigendian.npy").at("descr") == ">i4");
  CHECK(values.at("f32_bigendian.npy").at("descr") == ">f4");
  CHECK(values.at("v3.npy").at("version") == "3.0");
}

TEST_CASE("npy: fortran order, big-endian data and narrow integers in hand-made files") {
  TempDir dir;
  const std::string path = dir.file("h.npy");
  auto load = [&](const std::string& bytes) {
    testing::write_text(path, bytes);
    return io::load_npy(path);
  };
  // Column-major (2, 3): the file holds a00 a10 a01 a11 a02 a12.
  std::string data;
  for (std::int64_t v : {0, 3, 1, 4, 2, 5}) data += le<std::int64_t>(v);
  check_same(load(npy_file(npy_dict("<i8", "(2, 3)", true), data)), tensor({{0, 1, 2}, {3, 4, 5}}, kInt64));
  // Column-major (2, 3, 2): element (i, j, k) at i + 2 j + 6 k.
  data.clear();
  std::vector<double> expected(12);
  for (int k = 0; k < 2; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) {
        const double v = 100 * i + 10 * j + k;
        data += le<double>(v);
        expected[static_cast<std::size_t>(i * 6 + j * 2 + k)] = v;
      }
  check_same(load(npy_file(npy_dict("<f8", "(2, 3, 2)", true), data)), from_vector(expected, {2, 3, 2}));
  // Fortran order of 0-d, 1-d and empty arrays changes nothing.
  check_same(load(npy_file(npy_dict("<f8", "()", true), le<double>(4.5))), scalar_tensor(4.5, kFloat64));
  check_same(load(npy_file(npy_dict("<i8", "(2,)", true), le<std::int64_t>(7) + le<std::int64_t>(8))),
             tensor({7, 8}, kInt64));
  CHECK(load(npy_file(npy_dict("<f4", "(0, 5)", true), "")).shape() == Shape({0, 5}));

  // Big-endian: the bytes reversed per element.
  auto big_endian = [](auto v) {
    std::string b = le(v);
    return std::string(b.rbegin(), b.rend());
  };
  check_same(load(npy_file(npy_dict(">f4", "(2,)"), big_endian(1.5f) + big_endian(-0.25f))), tensor({1.5, -0.25}));
  check_same(load(npy_file(npy_dict(">f8", "(1,)"), big_endian(1e-300))), tensor({1e-300}, kFloat64));
  check_same(load(npy_file(npy_dict(">i8", "(2,)"), big_endian(std::int64_t{-2}) + big_endian(INT64_MAX))),
             from_vector(std::vector<std::int64_t>{-2, INT64_MAX}, {2}));
  check_same(load(npy_file(npy_dict(">i4", "(2,)"), big_endian(std::int32_t{-5}) + big_endian(std::int32_t{1 << 30}))),
             tensor({-5, 1 << 30}, kInt64));
  check_same(load(npy_file(npy_dict(">u2", "(1,)"), big_endian(std::uint16_t{65535}))), tensor({65535}, kInt64));
  // Big-endian and fortran order together.
  check_same(
      load(npy_file(npy_dict(">i4", "(2, 2)", true), big_endian(std::int32_t{1}) + big_endian(std::int32_t{3}) +
                                                         big_endian(std::int32_t{2}) + big_endian(std::int32_t{4}))),
      tensor({{1, 2}, {3, 4}}, kInt64));

  // Narrow integers widen to int64, signed or not; a bool byte other than 0 is true, as in NumPy.
  check_same(load(npy_file(npy_dict("|i1", "(3,)"), "\x80\xff\x7f")), tensor({-128, -1, 127}, kInt64));
  check_same(load(npy_file(npy_dict("|u1", "(2,)"), "\x80\xff")), tensor({128, 255}, kInt64));
  check_same(load(npy_file(npy_dict("<i2", "(1,)"), le<std::int16_t>(-300))), tensor({-300}, kInt64));
  check_same(load(npy_file(npy_dict("<u2", "(1,)"), le<std::uint16_t>(60000))), tensor({60000}, kInt64));
  check_same(load(npy_file(npy_dict("<i4", "(1,)"), le<std::int32_t>(INT32_MIN))), tensor({INT32_MIN}, kInt64));
  check_same(load(npy_file(npy_dict("<u4", "(1,)"), le<std::uint32_t>(UINT32_MAX))), tensor({UINT32_MAX}, kInt64));
  check_same(load(npy_file(npy_dict("|b1", "(3,)"), std::string("\x00\x01\x05", 3))),
             from_vector(std::vector<bool>{false, true, true}, {3}));

  // Header variations Python's literal syntax allows: other quotes and spacing, key order, a trailing comma
  // in the shape, Python 2's long integers in a version 1.0 file; versions 2.0 and 3.0.
  check_same(load(npy_file("{\"shape\":(2,1,),\"fortran_order\":False,\"descr\":\"<f4\"}  ", le(1.0f) + le(2.0f))),
             tensor({{1.0}, {2.0}}));
  check_same(load(npy_file(npy_dict("<f4", "(2L, 1L)"), le(1.0f) + le(2.0f))), tensor({{1.0}, {2.0}}));
  check_same(load(npy_file(npy_dict("<f4", "(1,)"), le(3.0f), 2)), tensor({3.0}));
  check_same(load(npy_file(npy_dict("<f4", "(1,)"), le(3.0f), 3)), tensor({3.0}));
}

TEST_CASE("npy: bad and unsupported files are typed errors naming the file and the field") {
  TempDir dir;
  const std::string path = dir.file("bad.npy");
  auto check_value_error = [&](const std::string& bytes, const std::string& expected) {
    testing::write_text(path, bytes);
    INFO("expected a ValueError containing: " << expected);
    CHECK_THROWS_WITH_AS(io::load_npy(path), doctest::Contains(("load_npy: " + path + ": ").c_str()), ValueError);
    CHECK_THROWS_WITH_AS(io::load_npy(path), doctest::Contains(expected.c_str()), ValueError);
  };
  auto check_io_error = [&](const std::string& bytes, const std::string& expected) {
    testing::write_text(path, bytes);
    INFO("expected an IoError containing: " << expected);
    CHECK_THROWS_WITH_AS(io::load_npy(path), doctest::Contains(("load_npy: " + path + ": ").c_str()), IoError);
    CHECK_THROWS_WITH_AS(io::load_npy(path), doctest::Contains(expected.c_str()), IoError);
  };
  const std::string f32x2 = le(1.0f) + le(2.0f);
  // The helpers make readable files.
  testing::write_text(path, npy_file(npy_dict("<f4", "(2,)"), f32x2));
  check_same(io::load_npy(path), tensor({1.0, 2.0}));

  check_value_error("PK\x03\x04 not npy", "not a .npy file: it starts with 'PK\\x03\\x04 n', not the magic string");
  check_value_error(std::string("\x93NUMPX\x01\x00", 8), "not a .npy file");
  check_value_error(npy_file(npy_dict("<f4", "(2,)"), f32x2, 4), "format version 4.0 is not one tapegrad reads");
  // Headers that do not parse.
  check_value_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", f32x2),
                    "header does not parse: expected ',' or '}' after the value of 'shape'");
  check_value_error(npy_file("['descr', '<f4']", f32x2),
                    "header does not parse: expected the header to start with '{'");
  check_value_error(npy_file("{descr: '<f4'}", f32x2), "expected a quoted key at byte 1, found 'd'");
  check_value_error(npy_file("{'descr' '<f4'}", f32x2), "expected ':' after the key 'descr'");
  check_value_error(npy_file("{'descr': '<f4, 'shape': (2,)}", f32x2),
                    "expected the closing quote of the string at byte");
  check_value_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", f32x2),
                    "expected only spaces after the closing '}'");
  check_value_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (2,)}", f32x2),
                    "header has the key 'shape' twice");
  check_value_error(npy_file("{'descr': '<f4', 'shape': (2,)}", f32x2), "header has no key 'fortran_order'");
  check_value_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", f32x2),
                    "header has a key 'extra' besides 'descr', 'fortran_order' and 'shape'");
  // Field values.
  check_value_error(npy_file(replaced(npy_dict("<f4", "(2,)"), "False", "0"), f32x2), "fortran_order '0' is not True");
  check_value_error(npy_file(npy_dict("<f4", "(2)"), f32x2), "shape '(2)' is not a tuple of non-negative integers");
  check_value_error(npy_file(npy_dict("<f4", "[2]"), f32x2), "shape '[2]' is not a tuple");
  check_value_error(npy_file(npy_dict("<f4", "(-2,)"), f32x2), "shape '(-2,)' is not a tuple");
  check_value_error(npy_file(npy_dict("<f4", "(2, 'a')"), f32x2), "shape '(2, 'a')' is not a tuple");
  check_value_error(npy_file(npy_dict("<f4", "(99999999999999999999999,)"), f32x2), "is not a tuple");
  check_value_error(npy_file(replaced(npy_dict("<f4", "(2,)"), "'<f4'", "3"), f32x2),
                    "descr '3' is not a quoted string");
  check_value_error(npy_file("{'descr': [('a', '<f4'), ('b', '<i8')], 'fortran_order': False, 'shape': (2,), }", f32x2),
                    "descr '[('a', '<f4'), ('b', '<i8')]' is a list of fields: structured dtypes are not supported");
  // dtypes.
  check_value_error(npy_file(npy_dict("|O", "(2,)"), f32x2),
                    "descr '|O' is an object array, which holds pickled Python objects (tapegrad reads '<f4'");
  check_value_error(npy_file(npy_dict("<f2", "(2,)"), f32x2), "descr '<f2' is float16, which tapegrad does not have");
  check_value_error(npy_file(npy_dict("<u8", "(1,)"), le<std::uint64_t>(1)), "descr '<u8' is uint64");
  check_value_error(npy_file(npy_dict("<U2", "(1,)"), f32x2), "descr '<U2' is a unicode string array");
  check_value_error(npy_file(npy_dict("|S8", "(1,)"), f32x2), "descr '|S8' is a byte string array");
  check_value_error(npy_file(npy_dict("<c8", "(1,)"), f32x2), "descr '<c8' is a complex array");
  check_value_error(npy_file(npy_dict("<M8[ns]", "(1,)"), le<std::int64_t>(0)), "descr '<M8[ns]' is a datetime");
  check_value_error(npy_file(npy_dict("<f16", "(1,)"), f32x2), "descr '<f16' is a float of 16 bytes");
  check_value_error(npy_file(npy_dict("", "(1,)"), f32x2), "descr '' is not a dtype tapegrad reads");
  // Shapes and sizes: checked before anything is allocated.
  check_value_error(npy_file(npy_dict("<f4", "(1, 1, 1, 1, 1, 1, 1, 1, 2)"), f32x2),
                    "shape (1, 1, 1, 1, 1, 1, 1, 1, 2) has 9 dimensions, more than tapegrad's 8");
  check_value_error(npy_file(npy_dict("<f8", "(4294967296, 4294967296, 4294967296)"), f32x2),
                    "shape (4294967296, 4294967296, 4294967296) is too large (its element count overflows)");
  check_value_error(npy_file(npy_dict("<f4", "(0, 4611686018427387904, 4611686018427387904)"), ""), "is too large");
  check_io_error(npy_file(npy_dict("<f4", "(1000000000000,)"), f32x2),
                 "truncated: the file is 88 bytes, shape (1000000000000,) of '<f4' needs 4000000000000 data "
                 "bytes, the file holds 8");
  check_io_error(npy_file(npy_dict("<f4", "(3,)"), f32x2), "shape (3,) of '<f4' needs 12 data bytes, the file holds 8");
  check_value_error(npy_file(npy_dict("<f4", "(1,)"), f32x2),
                    "the data size does not match the shape: shape (1,) of '<f4' needs 4 data bytes, the file holds 8");
  // Truncated inside the preamble or the header.
  check_io_error("", "truncated: the file is 0 bytes, which ends inside the magic string and version");
  check_io_error(std::string("\x93NUM", 4), "truncated: the file is 4 bytes");
  check_io_error(std::string("\x93NUMPY\x01\x00\x10", 9), "which ends inside the header length");
  check_io_error(std::string("\x93NUMPY\x02\x00\x10\x00\x00", 11), "which ends inside the header length");
  check_io_error(std::string("\x93NUMPY\x01\x00\x50\x00{}", 12),
                 "which ends inside the header: its length field says 80 bytes, 2 follow");
  // Files that cannot be read.
  CHECK_THROWS_WITH_AS(io::load_npy(dir.file("absent.npy")),
                       doctest::Contains(("load_npy: cannot open " + dir.file("absent.npy")).c_str()), IoError);
  CHECK_THROWS_WITH_AS(io::load_npy(dir.str()), doctest::Contains("it is a directory, not a file"), IoError);
}

TEST_CASE("npy: every truncation of a valid file is an IoError") {
  TempDir dir;
  const std::string path = dir.file("full.npy");
  io::save_npy(path, tensor({{1.0, 2.0}, {3.0, 4.0}}, kFloat64));
  const std::string full = testing::read_text(path);
  REQUIRE(full.size() == 128 + 32);
  const std::string cut = dir.file("cut.npy");
  for (std::size_t len = 0; len < full.size(); ++len) {
    testing::write_text(cut, full.substr(0, len));
    INFO("truncated to " << len << " of " << full.size() << " bytes");
    CHECK_THROWS_WITH_AS(io::load_npy(cut), doctest::Contains("truncated"), IoError);
  }
}

TEST_CASE("npy: save_npy refuses an undefined tensor, and a failed write keeps the old file") {
  TempDir dir;
  const std::string good = dir.file("good.npy");
  CHECK_THROWS_WITH_AS(io::save_npy(good, Tensor()), ("save_npy: the tensor is undefined (file " + good + ")").c_str(),
                       ValueError);
  CHECK(dir.count_files() == 0);
  const std::string missing = dir.file("no/such/dir/x.npy");
  CHECK_THROWS_WITH_AS(io::save_npy(missing, zeros({1})),
                       doctest::Contains(("save_npy: cannot create " + missing).c_str()), IoError);
  io::save_npy(good, tensor({1.0, 2.0}));
  const std::string before = testing::read_text(good);
  // The target is a non-empty directory: the temporary file is written, the rename fails.
  const std::string as_dir = dir.file("sub");
  REQUIRE(::mkdir(as_dir.c_str(), 0755) == 0);
  testing::write_text(as_dir + "/inside", "keep");
  CHECK_THROWS_WITH_AS(io::save_npy(as_dir, zeros({1})), doctest::Contains("save_npy: cannot rename"), IoError);
  CHECK(dir.count_files() == 2);  // good.npy and sub: no temporary file
  CHECK_THROWS_AS(io::save_npy(good, Tensor()), ValueError);
  CHECK(testing::read_text(good) == before);
}

TEST_CASE("npy: .npz archives round trip stored and compressed, with the arrays in order") {
  TempDir dir;
  Generator gen(9);
  const Tensor f32 = randn({3, 5}, gen);
  const NamedTensors arrays = {
      {"weight", f32.transpose(0, 1)},
      {"bias", tensor({0.25, -0.125}, kFloat64)},
      {"steps", tensor({-3, 9000000000LL}, kInt64)},
      {"mask", from_vector(std::vector<bool>{true, false, true}, {3})},
      {"scale", scalar_tensor(2.0)},
      {"nothing", zeros({0, 4})},
      {"a_zeros", zeros({1000, 37})},
      {"layers.0/größe", randn({2, 2}, gen, kFloat64)},  // a non-ASCII name, stored as UTF-8
  };
  for (const bool compressed : {false, true}) {
    CAPTURE(compressed);
    const std::string path = dir.file(compressed ? "c.npz" : "s.npz");
    io::save_npz(path, arrays, compressed);
    const NamedTensors back = io::load_npz(path);
    REQUIRE(back.size() == arrays.size());
    for (std::size_t i = 0; i < arrays.size(); ++i) {
      CAPTURE(arrays[i].first);
      CHECK(back[i].first == arrays[i].first);
      check_same(back[i].second, arrays[i].second);
    }
    // Every member is the .npy file save_npy writes, stored whole or deflated.
    const std::string bytes = testing::read_text(path);
    const std::string member_path = dir.file("member.npy");
    io::save_npy(member_path, arrays[1].second);
    const std::string npy = testing::read_text(member_path);
    CHECK((bytes.find(npy) != std::string::npos) == !compressed);
    // Equal arrays give equal files (no timestamps).
    io::save_npz(dir.file("again.npz"), arrays, compressed);
    CHECK(testing::read_text(dir.file("again.npz")) == bytes);
  }
  // Deflate shrinks the 148 KB of zeros.
  CHECK(testing::read_text(dir.file("c.npz")).size() < 10000);
  CHECK(testing::read_text(dir.file("s.npz")).size() > 148000);
  // An empty archive.
  io::save_npz(dir.file("none.npz"), {});
  CHECK(io::load_npz(dir.file("none.npz")).empty());
}

TEST_CASE("npy: .npz archives NumPy wrote load in archive order") {
  const nlohmann::json values = fixture_values();
  for (const char* name : {"arrays.npz", "arrays_compressed.npz"}) {
    CAPTURE(name);
    const nlohmann::json& members = values.at(name).at("members");
    const NamedTensors arrays = io::load_npz(kDir + "/" + name);
    REQUIRE(arrays.size() == members.size());
    for (std::size_t i = 0; i < arrays.size(); ++i) {
      CHECK(arrays[i].first == members[i].at("name").get<std::string>());
      CHECK(dtype_name(arrays[i].second.dtype()) == members[i].at("dtype").get<std::string>());
      check_same(arrays[i].second, expected_tensor(members[i]));
    }
  }
  // The archive order is not the alphabetical one, and one archive is deflated (method 8 in its first
  // local header), the other stored.
  CHECK(values.at("arrays.npz").at("members").at(0).at("name") == "weights");
  const std::string stored = io::read_file(kDir + "/arrays.npz"),
                    deflated = io::read_file(kDir + "/arrays_compressed.npz");
  CHECK(stored[8] == 0);
  CHECK(deflated[8] == 8);
}

TEST_CASE("npy: .npz archives from an independent ZIP writer, with and without ZIP64 fields") {
  TempDir dir;
  const std::string path = dir.file("z.npz");
  io::save_npy(dir.file("a.npy"), tensor({{1.0, 2.0}, {3.0, 4.0}}));
  io::save_npy(dir.file("b.npy"), tensor({5, 6, 7}, kInt64));
  const std::string a = testing::read_text(dir.file("a.npy")), b = testing::read_text(dir.file("b.npy"));
  for (const bool zip64 : {false, true}) {
    for (const std::uint16_t method : {0, 8}) {
      CAPTURE(zip64);
      CAPTURE(method);
      ZipMember ma = member("a.npy", a, method), mb = member("b.npy", b, method);
      ma.zip64 = mb.zip64 = zip64;
      testing::write_text(path, zip_archive({mb, ma}));
      const NamedTensors got = io::load_npz(path);
      REQUIRE(got.size() == 2);
      CHECK(got[0].first == "b");
      check_same(got[0].second, tensor({5, 6, 7}, kInt64));
      CHECK(got[1].first == "a");
      check_same(got[1].second, tensor({{1.0, 2.0}, {3.0, 4.0}}));
    }
  }
  // The bit that marks a data descriptor after the data changes nothing: sizes come from the directory.
  ZipMember with_descriptor = member("a.npy", a, 8);
  with_descriptor.flags = 1 << 3;
  testing::write_text(path, zip_archive({with_descriptor}));
  CHECK(io::load_npz(path).at(0).first == "a");
}

TEST_CASE("npy: damaged or unsupported .npz archives are typed errors naming the file and the member") {
  TempDir dir;
  const std::string path = dir.file("bad.npz");
  io::save_npy(dir.file("a.npy"), tensor({{1.0, 2.0}, {3.0, 4.0}}));
  const std::string a = testing::read_text(dir.file("a.npy"));
  auto check_error = [&](const std::string& bytes, const std::string& expected, bool value_error) {
    testing::write_text(path, bytes);
    INFO("expected " << (value_error ? "a ValueError" : "an IoError") << " containing: " << expected);
    const std::string prefix = "load_npz: " + path + ": ";
    if (value_error) {
      CHECK_THROWS_WITH_AS(io::load_npz(path), doctest::Contains(prefix.c_str()), ValueError);
      CHECK_THROWS_WITH_AS(io::load_npz(path), doctest::Contains(expected.c_str()), ValueError);
    } else {
      CHECK_THROWS_WITH_AS(io::load_npz(path), doctest::Contains(prefix.c_str()), IoError);
      CHECK_THROWS_WITH_AS(io::load_npz(path), doctest::Contains(expected.c_str()), IoError);
    }
  };
  // Not a ZIP archive at all (a .npy file), or nothing.
  check_error(a, "no ZIP end-of-central-directory record in the file's 144 bytes: not a ZIP archive, or a truncated",
              false);
  check_error("", "no ZIP end-of-central-directory record", false);

  // Unsupported members.
  ZipMember encrypted = member("a.npy", a);
  encrypted.flags = 1;
  check_error(zip_archive({encrypted}), "member 'a.npy' is encrypted, which is not supported", true);
  check_error(zip_archive({member("a.npy", a, 12)}),
              "member 'a.npy': compression method 12 is not supported (0, stored, and 8, deflate, are)", true);
  check_error(zip_archive({member("a.npy", a, 99)}), "member 'a.npy' is encrypted", true);
  check_error(zip_archive({member("a.npy", a), member("notes.txt", "hello")}),
              "member 'notes.txt' is not named '<name>.npy'", true);
  check_error(zip_archive({member(".npy", a)}), "member '.npy' is not named '<name>.npy'", true);
  check_error(zip_archive({member("a.npy", a), member("a.npy", a)}), "member 'a.npy' appears twice", true);
  // A member that is not a readable .npy file: the .npy reader's errors, naming the member.
  check_error(zip_archive({member("h.npy", npy_file(npy_dict("<f2", "(1,)"), std::string("\x00\x3c", 2)))}),
              "member 'h.npy': descr '<f2' is float16", true);
  check_error(zip_archive({member("t.npy", a.substr(0, a.size() - 1))}),
              "member 't.npy': truncated: the file is 143 bytes, shape (2, 2) of '<f4' needs 16 data bytes", false);

  // Damaged members.
  ZipMember wrong_crc = member("a.npy", a);
  wrong_crc.crc = 0x12345678;
  check_error(zip_archive({wrong_crc}),
              "member 'a.npy': CRC-32 mismatch: the directory says 0x12345678, the data has 0x", false);
  ZipMember too_big = member("a.npy", a, 8);
  too_big.zip64 = true;
  too_big.size = std::uint64_t{1} << 40;
  check_error(zip_archive({too_big}), "member 'a.npy': the directory states 1099511627776 bytes from", false);
  ZipMember short_size = member("a.npy", a, 8);
  short_size.size = a.size() - 1;
  check_error(zip_archive({short_size}),
              "member 'a.npy': the deflate stream holds more than the 143 bytes the directory states", false);
  ZipMember long_size = member("a.npy", a, 8);
  long_size.size = a.size() + 1;
  check_error(zip_archive({long_size}), "member 'a.npy': the deflate stream holds 144 bytes, the directory states 145",
              false);
  ZipMember cut_stream = member("a.npy", a, 8);
  cut_stream.raw = deflate_bytes(a).substr(0, 20);
  check_error(zip_archive({cut_stream}), "member 'a.npy': the deflate stream ends early, after", false);
  ZipMember trailing = member("a.npy", a, 8);
  trailing.raw = deflate_bytes(a) + "xyz";
  check_error(zip_archive({trailing}), "member 'a.npy': 3 bytes follow the end of the deflate stream", false);
  ZipMember stored_size = member("a.npy", a);
  stored_size.size = 10;
  check_error(zip_archive({stored_size}), "stored, but its compressed size 144 differs from its size 10", false);
  ZipMember no_extra = member("a.npy", a);
  no_extra.zip64 = true;
  no_extra.zip64_extra = false;
  check_error(zip_archive({no_extra}), "member 'a.npy': sizes or offset are 0xFFFFFFFF but the entry has no ZIP64",
              false);
  {
    std::string bytes = zip_archive({member("a.npy", a, 8)});
    bytes[30 + 5 + 3] = static_cast<char>(bytes[30 + 5 + 3] ^ 0x55);  // inside the deflate stream
    testing::write_text(path, bytes);
    CHECK_THROWS_WITH_AS(io::load_npz(path), doctest::Contains(("load_npz: " + path + ": member 'a.npy': ").c_str()),
                         IoError);
  }

  // A damaged directory.
  const std::string good = zip_archive({member("a.npy", a)});
  const std::size_t central = good.find("PK\x01\x02");
  const std::size_t end = good.find("PK\x05\x06");
  REQUIRE(central != std::string::npos);
  REQUIRE(end != std::string::npos);
  {
    std::string bytes = good;
    bytes[end + 18] = 1;  // the directory's offset, plus 65536
    check_error(
        bytes, "the central directory (offset 65715, 51 bytes) does not lie within the 230 bytes before the end record",
        false);
  }
  {
    std::string bytes = good;
    bytes[end + 10] = 3;  // 3 members in a directory of one
    check_error(bytes, "the end record counts 3 members, more than a central directory of 51 bytes can hold", false);
  }
  {
    std::string bytes = good;
    bytes[end + 4] = 1;  // this disk: 1
    check_error(bytes, "a ZIP archive split over several disks (this is disk 1) is not supported", true);
  }
  {
    std::string bytes = good;
    bytes[central] = 'X';
    check_error(bytes, "central directory entry 0 (offset 179) is missing or has no central directory signature",
                false);
  }
  {
    std::string bytes = good;
    bytes[central + 42] = 7;  // the local header's offset
    check_error(bytes, "member 'a.npy': no local header at offset 7", false);
  }
  {
    std::string bytes = good;
    bytes[30] = 'b';  // the local header's copy of the name
    check_error(bytes, "member 'a.npy': the local header names it 'b.npy'", false);
  }
  {
    std::string bytes = good;
    bytes[central + 20] = static_cast<char>(200);  // compressed size 200: past the directory
    bytes[central + 24] = static_cast<char>(200);
    check_error(bytes, "member 'a.npy': its data (offset 35, 200 bytes) runs past the 179 bytes before the central",
                false);
  }
  {
    std::string bytes = good;
    bytes[central + 28] = 60;  // a name longer than the directory
    check_error(bytes, "its name, extra field and comment run past the end of the central directory", false);
  }
  // Files that cannot be read.
  CHECK_THROWS_WITH_AS(io::load_npz(dir.file("absent.npz")), doctest::Contains("load_npz: cannot open"), IoError);
}

TEST_CASE("npy: damaged archives from save_npz: flipped bytes and every truncation are IoErrors") {
  TempDir dir;
  const std::string path = dir.file("s.npz");
  const NamedTensors arrays = {{"w", tensor({{1.0, 2.0}, {3.0, 4.0}})}, {"n", tensor({5}, kInt64)}};
  for (const bool compressed : {false, true}) {
    CAPTURE(compressed);
    io::save_npz(path, arrays, compressed);
    const std::string full = testing::read_text(path);
    // The layout: ZIP64 size fields in every local header and directory entry, and a ZIP64 end record.
    CHECK(find_all(full, std::string("PK\x03\x04", 4)).size() == 2);
    CHECK(find_all(full, std::string("PK\x01\x02", 4)).size() == 2);
    CHECK(find_all(full, std::string("PK\x06\x06", 4)).size() == 1);
    CHECK(find_all(full, std::string("PK\x06\x07", 4)).size() == 1);
    CHECK(full.substr(18, 8) == std::string(8, '\xff'));  // the first local header's sizes
    const std::string cut = dir.file("cut.npz");
    for (std::size_t len = 0; len < full.size(); ++len) {
      testing::write_text(cut, full.substr(0, len));
      INFO("truncated to " << len << " of " << full.size() << " bytes");
      CHECK_THROWS_AS(io::load_npz(cut), IoError);
    }
    // A flipped byte in the first member's data (stored: in the .npy header's padding) is a CRC mismatch or,
    // deflated, a stream that does not decode.
    std::string flipped = full;
    const std::size_t data = 30 + 5 + 20 + (compressed ? 10 : 100);
    flipped[data] = static_cast<char>(flipped[data] ^ 0x20);
    testing::write_text(cut, flipped);
    CHECK_THROWS_WITH_AS(io::load_npz(cut), doctest::Contains(("load_npz: " + cut + ": member 'w.npy': ").c_str()),
                         IoError);
    if (!compressed) CHECK_THROWS_WITH_AS(io::load_npz(cut), doctest::Contains("CRC-32 mismatch"), IoError);
    // The ZIP64 locator (the 20 bytes before the 22 of the end record) pointing at something else.
    std::string bad_locator = full;
    bad_locator.replace(full.size() - 22 - 20 + 8, 8, std::string(8, '\0'));
    testing::write_text(cut, bad_locator);
    CHECK_THROWS_WITH_AS(io::load_npz(cut),
                         doctest::Contains("the ZIP64 end-of-central-directory locator points at offset 0, where "
                                           "there is no ZIP64 end record"),
                         IoError);
  }
}

TEST_CASE("npy: save_npz refuses empty, duplicate, over-long and undefined arrays before writing") {
  TempDir dir;
  const std::string path = dir.file("x.npz");
  CHECK_THROWS_WITH_AS(io::save_npz(path, {{"", zeros({1})}}),
                       ("save_npz: empty array name (file " + path + ")").c_str(), ValueError);
  CHECK_THROWS_WITH_AS(io::save_npz(path, {{"x", zeros({1})}, {"y", zeros({1})}, {"x", zeros({2})}}, true),
                       ("save_npz: duplicate array name 'x' (file " + path + ")").c_str(), ValueError);
  CHECK_THROWS_WITH_AS(io::save_npz(path, {{std::string(70000, 'n'), zeros({1})}}),
                       doctest::Contains("has 70000 bytes, more than a ZIP member name can hold"), ValueError);
  CHECK_THROWS_WITH_AS(io::save_npz(path, {{"x", Tensor()}}), doctest::Contains("save_npz: array 'x' is undefined"),
                       ValueError);
  CHECK(dir.count_files() == 0);
  const std::string missing = dir.file("no/dir/x.npz");
  CHECK_THROWS_WITH_AS(io::save_npz(missing, {{"x", zeros({1})}}),
                       doctest::Contains(("save_npz: cannot create " + missing).c_str()), IoError);
  CHECK(dir.count_files() == 0);
}

// Writes the files tests/read_npy.py loads with NumPy (CTest runs it after this case, when NumPy is there):
// every .npy fixture loaded and saved again, a transposed view, a large array, and the two archives
// saved again stored and compressed, plus one with a non-ASCII name.
TEST_CASE("npy: write the files for numpy") {
  TempDir dir;
  const char* env = std::getenv("TAPEGRAD_NPY_OUT");
  const std::string out = env != nullptr ? std::string(env) : dir.str();
  std::filesystem::create_directories(out);
  const nlohmann::json values = fixture_values();
  int written = 0;
  for (const auto& [name, j] : values.items()) {
    if (name.substr(name.size() - 4) != ".npy") continue;
    const Tensor t = io::load_npy(kDir + "/" + name);
    io::save_npy(out + "/" + name, t);
    check_same(io::load_npy(out + "/" + name), expected_tensor(j));
    ++written;
  }
  CHECK(written == 12);
  const Tensor f32 = io::load_npy(kDir + "/f32.npy");
  io::save_npy(out + "/f32_transposed.npy", f32.transpose(0, 1));
  std::vector<double> big(1000 * 37);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<double>(i) / 8;  // np.arange(37000) / 8
  io::save_npy(out + "/large.npy", from_vector(big, {1000, 37}));
  io::save_npz(out + "/arrays.npz", io::load_npz(kDir + "/arrays.npz"), false);
  io::save_npz(out + "/arrays_compressed.npz", io::load_npz(kDir + "/arrays_compressed.npz"), true);
  io::save_npz(out + "/names.npz", {{"gewicht_ä", f32.transpose(0, 1)}, {"ids", tensor({1, 2}, kInt64)}});
  CHECK(io::load_npz(out + "/names.npz").at(0).first == "gewicht_ä");
  CHECK(io::load_npz(out + "/arrays_compressed.npz").size() == 3);
}
