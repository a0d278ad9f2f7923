// NumPy .npy and .npz reading and writing. See npy.h for the formats.

#include "tapegrad/io/npy.h"

// next_in is a pointer to const, as the input is.
#define ZLIB_CONST
#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/io/file.h"

// Tensors are stored in host order and both formats are little-endian (as written), so the host must be too.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "tapegrad npy I/O assumes a little-endian host");

namespace tapegrad::io {

namespace {

constexpr std::string_view kMagic("\x93NUMPY", 6);
// NumPy aligns the data to this many bytes.
constexpr std::size_t kAlign = 64;
// NumPy leaves this many characters, less the digits of the first extent, as spaces after the dict, so
// that a file can grow along its first axis without moving the data.
constexpr std::size_t kGrowthDigits = 21;

// ---------------------------------------------------------------- little-endian fields

template <class T>
T get_le(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // little-endian host (static_assert above)
  return v;
}

template <class T>
void put_le(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}

// Text from a file, quoted and cut short for a message, with bytes that are not printable ASCII as \xNN.
std::string shown(std::string_view text, std::size_t max = 80) {
  std::string out = "'";
  for (std::size_t i = 0; i < std::min(text.size(), max); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out + (text.size() > max ? "'..." : "'");
}

std::string hex32(std::uint32_t v) {
  char hex[11];
  std::snprintf(hex, sizeof hex, "0x%08x", static_cast<unsigned>(v));
  return hex;
}

// NumPy's repr of a shape: "()", "(5,)", "(2, 3)".
std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// ---------------------------------------------------------------- writing .npy

const char* descr_of(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return "<f4";
    case DType::Float64:
      return "<f8";
    case DType::Int64:
      return "<i8";
    case DType::Bool:
      return "|b1";
    case DType::BFloat16:
      break;  // refused by encode_npy
  }
  return "?";
}

// A tensor as a .npy file: the header, and the elements of a contiguous copy (which owns them).
struct EncodedNpy {
  std::string header;
  Tensor contiguous;
  std::string_view data;
};

EncodedNpy encode_npy(const Tensor& t, const char* op) {
  if (t.dtype() == kBFloat16)
    throw TypeError(
        message(op,
                ": NumPy has no bfloat16 dtype, so a bfloat16 tensor has no .npy form; save t.to(kFloat32), "
                "or use safetensors, which stores BF16"));
  EncodedNpy out;
  const std::vector<std::int64_t> dims = t.shape().vec();
  const std::vector<std::uint64_t> shape(dims.begin(), dims.end());
  // Byte for byte np.save's header: the dict with its keys sorted, NumPy's spare room for growth,
  // then spaces and a '\n' up to the next multiple of 64 (a whole 64 when already aligned, as NumPy does).
  std::string dict = std::string("{'descr': '") + descr_of(t.dtype()) +
                     "', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
  if (!shape.empty()) dict.append(kGrowthDigits - std::to_string(shape[0]).size(), ' ');
  const std::size_t preamble = kMagic.size() + 2 + 2;  // magic, version 1.0, u16 header length
  const std::size_t padding = kAlign - (preamble + dict.size() + 1) % kAlign;
  const std::size_t header_length = dict.size() + padding + 1;  // at most a few hundred bytes (rank <= 8)
  out.header.reserve(preamble + header_length);
  out.header.append(kMagic);
  out.header += '\x01';
  out.header += '\x00';
  put_le<std::uint16_t>(out.header, static_cast<std::uint16_t>(header_length));
  out.header += dict;
  out.header.append(padding, ' ');
  out.header += '\n';

  out.contiguous = t.detach().contiguous();
  const std::size_t nbytes = static_cast<std::size_t>(out.contiguous.numel()) * element_size(t.dtype());
  if (nbytes > 0) {
    const void* src = dispatch_all(t.dtype(), [&](auto tag) -> const void* {
      using T = decltype(tag);
      return out.contiguous.data_ptr<T>();
    });
    out.data = std::string_view(static_cast<const char*>(src), nbytes);
  }
  return out;
}

// ---------------------------------------------------------------- reading .npy: the header

// Python's whitespace between tokens.
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::uint64_t> shape;
};

// The header's dict literal, parsed as Python's ast.literal_eval would for the values a .npy header
// holds: quoted strings, True/False and tuples of non-negative integers. Any other value (a list of
// fields for a structured dtype, say) is kept as its text, for the message that rejects it.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string where, bool python2_longs)
      : text_(text), where_(std::move(where)), python2_longs_(python2_longs) {}

  NpyHeader parse() {
    skip_space();
    expect('{', "the header to start with '{'");
    std::map<std::string, std::string_view> values;  // key -> the value's text
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::size_t key_at = pos_;
      const char quote = peek();
      if (quote != '\'' && quote != '"') fail("a quoted key", key_at);
      const std::size_t close = text_.find(quote, key_at + 1);
      if (close == std::string_view::npos)
        fail("the closing quote of the key at byte " + std::to_string(key_at), text_.size());
      const std::string key(text_.substr(key_at + 1, close - key_at - 1));
      pos_ = close + 1;
      skip_space();
      expect(':', "':' after the key " + shown(key));
      skip_space();
      const std::size_t value_at = pos_;
      const std::string_view value = value_text();
      if (value.empty()) fail("a value for the key " + shown(key), value_at);
      if (!values.emplace(key, value).second) value_error("has the key " + shown(key) + " twice");
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') fail("',' or '}' after the value of " + shown(key), pos_);
    }
    ++pos_;
    skip_space();
    if (pos_ != text_.size()) fail("only spaces after the closing '}'", pos_);

    for (const char* key : {"descr", "fortran_order", "shape"})
      if (!values.count(key)) value_error("has no key '" + std::string(key) + "'");
    for (const auto& entry : values)
      if (entry.first != "descr" && entry.first != "fortran_order" && entry.first != "shape")
        value_error("has a key " + shown(entry.first) + " besides 'descr', 'fortran_order' and 'shape'");

    NpyHeader h;
    const std::string_view descr = values["descr"];
    if (descr.front() == '[')
      value_error("descr " + shown(descr) + " is a list of fields: structured dtypes are not supported");
    if (!unquote(descr, h.descr)) value_error("descr " + shown(descr) + " is not a quoted string");
    const std::string_view order = values["fortran_order"];
    if (order != "True" && order != "False") value_error("fortran_order " + shown(order) + " is not True or False");
    h.fortran_order = order == "True";
    const std::string_view shape = values["shape"];
    if (!int_tuple(shape, h.shape)) value_error("shape " + shown(shape) + " is not a tuple of non-negative integers");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& expected, std::size_t at) const {
    const std::string found = at < text_.size() ? shown(text_.substr(at, 1)) : "the end of the header";
    throw ValueError(message(where_, ": header does not parse: expected ", expected, " at byte ", at, ", found ", found,
                             " (header ", shown(text_, 120), ")"));
  }
  [[noreturn]] void value_error(const std::string& what) const {
    throw ValueError(where_ + ": header " + what + " (header " + shown(text_, 120) + ")");
  }

  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }
  void expect(char c, const std::string& what) {
    if (peek() != c) fail(what, pos_);
    ++pos_;
  }

  // The text of one value: up to the ',', ':' or '}' that ends it outside brackets and quotes,
  // without trailing spaces.
  std::string_view value_text() {
    const std::size_t start = pos_;
    int depth = 0;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\'' || c == '"') {
        const std::size_t close = text_.find(c, pos_ + 1);
        if (close == std::string_view::npos)
          fail("the closing quote of the string at byte " + std::to_string(pos_), text_.size());
        pos_ = close + 1;
        continue;
      }
      if (c == '(' || c == '[' || c == '{') ++depth;
      else if (c == ')' || c == ']' || (c == '}' && depth > 0)) --depth;
      else if (depth == 0 && (c == ',' || c == ':' || c == '}')) break;
      if (depth < 0) fail("balanced brackets", pos_);
      ++pos_;
    }
    if (depth != 0) fail("the closing bracket of the value at byte " + std::to_string(start), text_.size());
    std::string_view v = text_.substr(start, pos_ - start);
    while (!v.empty() && is_space(v.back())) v.remove_suffix(1);
    return v;
  }

  // 'text' or "text", without escapes (NumPy's headers have none).
  static bool unquote(std::string_view v, std::string& out) {
    if (v.size() < 2 || (v.front() != '\'' && v.front() != '"') || v.back() != v.front()) return false;
    const std::string_view inner = v.substr(1, v.size() - 2);
    if (inner.find(v.front()) != std::string_view::npos || inner.find('\\') != std::string_view::npos) return false;
    out = std::string(inner);
    return true;
  }

  // "()", "(5,)", "(2, 3)" or "(2, 3,)" with non-negative decimal integers (Python 2's "3L" too, in the
  // versions it may have written). "(5)" is 5 in Python, not a tuple.
  bool int_tuple(std::string_view v, std::vector<std::uint64_t>& out) const {
    if (v.size() < 2 || v.front() != '(' || v.back() != ')') return false;
    std::size_t i = 1;
    const std::size_t end = v.size() - 1;
    auto skip = [&] {
      while (i < end && is_space(v[i])) ++i;
    };
    bool trailing_comma = false;
    skip();
    while (i < end) {
      if (v[i] < '0' || v[i] > '9') return false;
      std::uint64_t n = 0;
      for (; i < end && v[i] >= '0' && v[i] <= '9'; ++i) {
        if (n > (UINT64_MAX - 9) / 10) return false;  // more digits than any extent
        n = n * 10 + static_cast<std::uint64_t>(v[i] - '0');
      }
      if (python2_longs_ && i < end && (v[i] == 'L' || v[i] == 'l')) ++i;
      out.push_back(n);
      skip();
      trailing_comma = false;
      if (i < end) {
        if (v[i] != ',') return false;
        ++i;
        trailing_comma = true;
        skip();
      }
    }
    return out.size() != 1 || trailing_comma;
  }

  std::string_view text_;
  std::string where_;
  bool python2_longs_;
  std::size_t pos_ = 0;
};

// ---------------------------------------------------------------- reading .npy: dtypes and data

// A descr the reader takes: the tapegrad dtype it becomes and how to read one element.
struct FileType {
  DType dtype;
  char kind;  // 'f', 'i', 'u' or 'b'
  std::size_t size;
  bool swap;  // big-endian in the file
};

FileType parse_descr(const std::string& descr, const std::string& where) {
  std::size_t i = 0;
  char order = '=';
  if (!descr.empty() && (descr[0] == '<' || descr[0] == '>' || descr[0] == '|' || descr[0] == '=')) order = descr[i++];
  const char kind = i < descr.size() ? descr[i++] : '\0';
  std::size_t size = 0;
  bool digits = i < descr.size();
  for (; i < descr.size(); ++i) {
    if (descr[i] < '0' || descr[i] > '9' || size > 1000) {
      digits = false;
      break;
    }
    size = size * 10 + static_cast<std::size_t>(descr[i] - '0');
  }
  auto supported = [&](DType dtype) { return FileType{dtype, kind, size, order == '>' && size > 1}; };
  if (digits) {
    if (kind == 'f' && size == 4) return supported(DType::Float32);
    if (kind == 'f' && size == 8) return supported(DType::Float64);
    if ((kind == 'i' && (size == 1 || size == 2 || size == 4 || size == 8)) ||
        (kind == 'u' && (size == 1 || size == 2 || size == 4)))
      return supported(DType::Int64);
    if (kind == 'b' && size == 1) return supported(DType::Bool);
  }
  std::string why;
  if (kind == 'f' && size == 2) why = "float16, which tapegrad does not have: save a.astype(np.float32) instead";
  else if (kind == 'f') why = "a float of " + std::to_string(size) + " bytes";
  else if (kind == 'u' && size == 8) why = "uint64, whose values above 2^63 - 1 do not fit int64";
  else if (kind == 'O') why = "an object array, which holds pickled Python objects";
  else if (kind == 'U') why = "a unicode string array";
  else if (kind == 'S' || kind == 'a') why = "a byte string array";
  else if (kind == 'V') why = "a void (raw bytes or structured) array";
  else if (kind == 'c') why = "a complex array";
  else if (kind == 'M' || kind == 'm') why = "a datetime or timedelta array";
  else why = "not a dtype tapegrad reads";
  throw ValueError(where + ": descr " + shown(descr) + " is " + why +
                   " (tapegrad reads '<f4', '<f8', '<i8' and '|b1', widens '|i1' '<i2' '<i4' '|u1' '<u2' '<u4' to "
                   "int64, and takes each in either byte order)");
}

// n elements of type Src from src (byte-swapped when swap) into dst, converted to Dst.
template <class Src, class Dst>
void convert(const char* src, std::size_t n, bool swap, Dst* dst) {
  if constexpr (std::is_same_v<Src, Dst>) {
    if (!swap) {
      std::memcpy(dst, src, n * sizeof(Src));
      return;
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    char bytes[sizeof(Src)];
    std::memcpy(bytes, src + i * sizeof(Src), sizeof(Src));
    if (swap) std::reverse(bytes, bytes + sizeof(Src));
    Src v;
    std::memcpy(&v, bytes, sizeof(Src));
    if constexpr (std::is_same_v<Dst, bool>) dst[i] = v != 0;  // any nonzero byte is true, as in NumPy
    else dst[i] = static_cast<Dst>(v);
  }
}

void read_elements(const FileType& type, const char* src, std::size_t n, const Tensor& out) {
  switch (type.dtype) {
    case DType::Float32:
      return convert<float>(src, n, type.swap, out.data_ptr<float>());
    case DType::Float64:
      return convert<double>(src, n, type.swap, out.data_ptr<double>());
    case DType::Bool:
      return convert<std::uint8_t>(src, n, type.swap, out.data_ptr<bool>());
    case DType::Int64:
    case DType::BFloat16:  // never parsed from a file
      break;
  }
  std::int64_t* dst = out.data_ptr<std::int64_t>();
  const bool is_signed = type.kind == 'i';
  switch (type.size) {
    case 1:
      return is_signed ? convert<std::int8_t>(src, n, type.swap, dst) : convert<std::uint8_t>(src, n, type.swap, dst);
    case 2:
      return is_signed ? convert<std::int16_t>(src, n, type.swap, dst) : convert<std::uint16_t>(src, n, type.swap, dst);
    case 4:
      return is_signed ? convert<std::int32_t>(src, n, type.swap, dst) : convert<std::uint32_t>(src, n, type.swap, dst);
    default:
      return convert<std::int64_t>(src, n, type.swap, dst);
  }
}

// The tensor in the bytes of a .npy file; `where` ("load_npy: <path>") starts every message.
Tensor decode_npy(std::string_view bytes, const std::string& where) {
  const std::size_t size = bytes.size();
  if (bytes.substr(0, kMagic.size()) != kMagic.substr(0, std::min(size, kMagic.size())))
    throw ValueError(where + ": not a .npy file: it starts with " + shown(bytes.substr(0, kMagic.size())) +
                     ", not the magic string '\\x93NUMPY'");
  auto truncated = [&](const std::string& what) {
    return IoError(where + ": truncated: the file is " + std::to_string(size) + " bytes, " + what);
  };
  if (size < kMagic.size() + 2) throw truncated("which ends inside the magic string and version");
  const int major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0)
    throw ValueError(
        message(where, ": format version ", major, ".", minor, " is not one tapegrad reads (1.0, 2.0 and 3.0)"));
  const std::size_t length_size = major == 1 ? 2 : 4;
  const std::size_t preamble = kMagic.size() + 2 + length_size;
  if (size < preamble) throw truncated("which ends inside the header length");
  const std::size_t header_length =
      major == 1 ? get_le<std::uint16_t>(bytes.data() + 8) : get_le<std::uint32_t>(bytes.data() + 8);
  if (header_length > size - preamble)
    throw truncated("which ends inside the header: its length field says " + std::to_string(header_length) +
                    " bytes, " + std::to_string(size - preamble) + " follow");

  const NpyHeader header = HeaderParser(bytes.substr(preamble, header_length), where, major < 3).parse();
  const FileType type = parse_descr(header.descr, where);
  const std::string shape = shape_text(header.shape);
  if (header.shape.size() > static_cast<std::size_t>(kMaxRank))
    throw ValueError(message(where, ": shape ", shape, " has ", header.shape.size(),
                             " dimensions, more than tapegrad's ", kMaxRank));
  // The element count and the extent (the product with zeros counted as 1, which bounds the strides)
  // stay below 2^59, so the byte counts below cannot wrap; checked before multiplying.
  constexpr std::uint64_t kLimit = std::uint64_t{1} << 59;
  std::uint64_t numel = 1, extent = 1;
  for (const std::uint64_t d : header.shape) {
    if (extent > kLimit / std::max<std::uint64_t>(d, 1))
      throw ValueError(where + ": shape " + shape + " is too large (its element count overflows)");
    extent *= std::max<std::uint64_t>(d, 1);
    numel *= d;
  }
  const std::uint64_t needed = numel * type.size;
  const std::uint64_t held = size - preamble - header_length;
  if (needed > held)
    throw truncated("shape " + shape + " of " + shown(header.descr) + " needs " + std::to_string(needed) +
                    " data bytes, the file holds " + std::to_string(held));
  if (needed < held)
    throw ValueError(message(where, ": the data size does not match the shape: shape ", shape, " of ",
                             shown(header.descr), " needs ", needed, " data bytes, the file holds ", held));

  // Fortran order is C order of the reversed shape; the axes are then reversed back.
  Shape file_shape;
  for (const std::uint64_t d : header.shape) file_shape.push_back(static_cast<std::int64_t>(d));
  if (header.fortran_order) std::reverse(file_shape.begin(), file_shape.end());
  Tensor out = empty(file_shape, type.dtype);
  if (numel > 0) read_elements(type, bytes.data() + preamble + header_length, static_cast<std::size_t>(numel), out);
  if (header.fortran_order && file_shape.size() > 1) {
    Dims axes;
    for (int i = file_shape.size() - 1; i >= 0; --i) axes.push_back(i);
    out = out.permute(axes).contiguous();
  }
  return out;
}

// ---------------------------------------------------------------- ZIP archives

constexpr std::uint32_t kLocalSignature = 0x04034b50;
constexpr std::uint32_t kCentralSignature = 0x02014b50;
constexpr std::uint32_t kEndSignature = 0x06054b50;
constexpr std::uint32_t kEnd64Signature = 0x06064b50;
constexpr std::uint32_t kLocator64Signature = 0x07064b50;
constexpr std::size_t kLocalSize = 30, kCentralSize = 46, kEndSize = 22, kEnd64Size = 56, kLocator64Size = 20;
constexpr std::uint16_t kZip64ExtraId = 0x0001;
constexpr std::uint32_t kFull32 = 0xffffffff;
constexpr std::uint16_t kFull16 = 0xffff;
constexpr std::uint16_t kStored = 0, kDeflated = 8;
constexpr std::uint16_t kZip64Version = 45;        // "version needed to extract" for ZIP64 entries
constexpr std::uint16_t kMadeBy = (3 << 8) | 45;   // Unix, ZIP 4.5
constexpr std::uint16_t kDate1980 = (1 << 5) | 1;  // DOS date 1980-01-01: archives do not depend on the clock
constexpr std::uint16_t kUtf8Flag = 1 << 11;
// Deflate cannot expand data by more than this factor (its densest code is 258 bytes from one byte).
constexpr std::uint64_t kMaxDeflateRatio = 1032;

// zlib counts bytes in 32 bits: buffers are handed over in pieces of at most UINT_MAX bytes. The size of
// the next piece of [pos, end), and pos moved past it.
uInt next_piece(std::uint64_t end, std::uint64_t& pos) {
  const std::uint64_t n = std::min<std::uint64_t>(end - pos, UINT_MAX);
  pos += n;
  return static_cast<uInt>(n);
}

// Raw deflate (no zlib header: what ZIP stores) of the pieces, at zlib's default level like Python's zipfile.
std::string deflate_raw(const std::vector<std::string_view>& pieces, const std::string& where) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw IoError(where + ": zlib's deflateInit2 failed");
  std::uint64_t total = 0;
  for (const std::string_view p : pieces) total += p.size();
  std::string out(static_cast<std::size_t>(std::min<std::uint64_t>(deflateBound(&zs, total), 1 << 20)) + 64, '\0');
  std::uint64_t produced = 0;
  // One pass per piece, and a last one with no input that finishes the stream.
  for (std::size_t i = 0; i <= pieces.size(); ++i) {
    const bool finish = i == pieces.size();
    const std::string_view piece = finish ? std::string_view() : pieces[i];
    std::uint64_t fed = 0;
    int rc = Z_OK;
    do {
      if (zs.avail_in == 0 && fed < piece.size()) {
        zs.next_in = reinterpret_cast<const Bytef*>(piece.data() + fed);
        zs.avail_in = next_piece(piece.size(), fed);
      }
      if (produced == out.size()) out.resize(out.size() * 2);
      std::uint64_t given = produced;
      zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
      zs.avail_out = next_piece(out.size(), given);
      const uInt space = zs.avail_out;
      rc = deflate(&zs, finish ? Z_FINISH : Z_NO_FLUSH);
      produced += space - zs.avail_out;
      if (rc == Z_STREAM_ERROR) {
        deflateEnd(&zs);
        throw IoError(where + ": zlib's deflate failed");
      }
    } while (finish ? rc != Z_STREAM_END : (fed < piece.size() || zs.avail_in > 0));
  }
  deflateEnd(&zs);
  out.resize(static_cast<std::size_t>(produced));
  return out;
}

// Inflates a raw deflate stream that must decode to exactly `size` bytes and end with the input.
std::string inflate_raw(std::string_view in, std::uint64_t size, const std::string& where) {
  z_stream zs{};
  if (inflateInit2(&zs, -15) != Z_OK) throw IoError(where + ": zlib's inflateInit2 failed");
  std::string out(static_cast<std::size_t>(size), '\0');
  char overflow = 0;  // handed to zlib once out is full: a byte written here is one too many
  bool overflow_given = false;
  std::uint64_t fed = 0, given = 0;
  std::string error;
  while (true) {
    if (zs.avail_in == 0 && fed < in.size()) {
      zs.next_in = reinterpret_cast<const Bytef*>(in.data() + fed);
      zs.avail_in = next_piece(in.size(), fed);
    }
    if (zs.avail_out == 0 && given < size) {
      zs.next_out = reinterpret_cast<Bytef*>(out.data() + given);
      zs.avail_out = next_piece(size, given);
    } else if (zs.avail_out == 0) {
      zs.next_out = reinterpret_cast<Bytef*>(&overflow);
      zs.avail_out = 1;
      overflow_given = true;
    }
    const int rc = inflate(&zs, Z_NO_FLUSH);
    if (overflow_given && zs.avail_out == 0) {
      error = "the deflate stream holds more than the " + std::to_string(size) + " bytes the directory states";
      break;
    }
    if (rc == Z_STREAM_END) break;
    if (rc == Z_BUF_ERROR) {  // no progress possible: every input byte was used (output space is always given)
      error = "the deflate stream ends early, after " + std::to_string(given - zs.avail_out) + " of " +
              std::to_string(size) + " bytes";
      break;
    }
    if (rc != Z_OK) {
      error = std::string("the deflate stream is corrupt (zlib: ") + (zs.msg != nullptr ? zs.msg : "no message") + ")";
      break;
    }
  }
  const std::uint64_t produced = overflow_given ? size + 1 - zs.avail_out : given - zs.avail_out;
  const std::uint64_t left = zs.avail_in + (in.size() - fed);
  inflateEnd(&zs);
  if (!error.empty()) throw IoError(where + ": " + error);
  if (produced != size)
    throw IoError(message(where, ": the deflate stream holds ", produced, " bytes, the directory states ", size));
  if (left != 0) throw IoError(message(where, ": ", left, " bytes follow the end of the deflate stream"));
  return out;
}

std::uint32_t crc32_of(const std::vector<std::string_view>& pieces) {
  uLong crc = ::crc32_z(0L, Z_NULL, 0);
  for (const std::string_view p : pieces)  // (a null buffer would make zlib return the initial value)
    if (!p.empty()) crc = ::crc32_z(crc, reinterpret_cast<const Bytef*>(p.data()), p.size());
  return static_cast<std::uint32_t>(crc);
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// One member as read from the central directory.
struct ZipEntry {
  std::string name;
  std::uint16_t flags, method;
  std::uint32_t crc;
  std::uint64_t compressed_size, size, offset;
};

struct ZipDirectory {
  std::vector<ZipEntry> entries;  // in archive order
  std::uint64_t offset;           // where the directory starts: the members' data lies before
};

// The central directory of the archive in `file`.
ZipDirectory read_directory(std::string_view file, const std::string& where) {
  const std::size_t size = file.size();
  // The end record is the last 22 bytes but for a comment of up to 64 KiB.
  std::size_t end = std::string_view::npos;
  if (size >= kEndSize)
    for (std::size_t pos = size - kEndSize + 1; pos-- > 0 && size - pos <= kEndSize + kFull16;)
      if (get_le<std::uint32_t>(file.data() + pos) == kEndSignature &&
          pos + kEndSize + get_le<std::uint16_t>(file.data() + pos + 20) <= size) {
        end = pos;
        break;
      }
  if (end == std::string_view::npos)
    throw IoError(message(where, ": no ZIP end-of-central-directory record in the file's ", size,
                          " bytes: not a ZIP archive, or a truncated one"));
  const char* e = file.data() + end;
  std::uint32_t disk = get_le<std::uint16_t>(e + 4), directory_disk = get_le<std::uint16_t>(e + 6);
  std::uint64_t count = get_le<std::uint16_t>(e + 10);
  std::uint64_t directory_size = get_le<std::uint32_t>(e + 12), directory_offset = get_le<std::uint32_t>(e + 16);
  std::uint64_t directory_limit = end;  // the directory lies before the end record(s)
  if (end >= kLocator64Size && get_le<std::uint32_t>(e - kLocator64Size) == kLocator64Signature) {
    // ZIP64: the locator points at the ZIP64 end record, whose counts and offsets are 64-bit.
    const std::uint64_t at = get_le<std::uint64_t>(e - kLocator64Size + 8);
    if (at > end - kLocator64Size || end - kLocator64Size - at < kEnd64Size ||
        get_le<std::uint32_t>(file.data() + at) != kEnd64Signature)
      throw IoError(message(where, ": the ZIP64 end-of-central-directory locator points at offset ", at,
                            ", where there is no ZIP64 end record"));
    const char* z = file.data() + at;
    disk = get_le<std::uint32_t>(z + 16);
    directory_disk = get_le<std::uint32_t>(z + 20);
    count = get_le<std::uint64_t>(z + 32);
    directory_size = get_le<std::uint64_t>(z + 40);
    directory_offset = get_le<std::uint64_t>(z + 48);
    directory_limit = at;
  }
  if (disk != 0 || directory_disk != 0)
    throw ValueError(
        message(where, ": a ZIP archive split over several disks (this is disk ", disk, ") is not supported"));
  if (directory_offset > directory_limit || directory_size > directory_limit - directory_offset)
    throw IoError(message(where, ": the central directory (offset ", directory_offset, ", ", directory_size,
                          " bytes) does not lie within the ", directory_limit, " bytes before the end record"));
  if (count > directory_size / kCentralSize)
    throw IoError(message(where, ": the end record counts ", count, " members, more than a central directory of ",
                          directory_size, " bytes can hold"));

  ZipDirectory directory{{}, directory_offset};
  std::set<std::string> seen;
  std::uint64_t pos = directory_offset;
  const std::uint64_t directory_end = directory_offset + directory_size;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::string at = where + ": central directory entry " + std::to_string(i);
    if (directory_end - pos < kCentralSize || get_le<std::uint32_t>(file.data() + pos) != kCentralSignature)
      throw IoError(message(at, " (offset ", pos, ") is missing or has no central directory signature"));
    const char* c = file.data() + pos;
    const std::uint64_t name_size = get_le<std::uint16_t>(c + 28), extra_size = get_le<std::uint16_t>(c + 30),
                        comment_size = get_le<std::uint16_t>(c + 32);
    if (directory_end - pos - kCentralSize < name_size + extra_size + comment_size)
      throw IoError(at + ": its name, extra field and comment run past the end of the central directory");
    ZipEntry entry;
    entry.name = std::string(c + kCentralSize, name_size);
    entry.flags = get_le<std::uint16_t>(c + 8);
    entry.method = get_le<std::uint16_t>(c + 10);
    entry.crc = get_le<std::uint32_t>(c + 16);
    entry.compressed_size = get_le<std::uint32_t>(c + 20);
    entry.size = get_le<std::uint32_t>(c + 24);
    std::uint32_t start_disk = get_le<std::uint16_t>(c + 34);
    entry.offset = get_le<std::uint32_t>(c + 42);
    const std::string member = where + ": member " + shown(entry.name);
    // ZIP64: the fields that are all ones come, in this order, from the extra field with id 1.
    const bool needs_zip64 =
        entry.size == kFull32 || entry.compressed_size == kFull32 || entry.offset == kFull32 || start_disk == kFull16;
    bool found_zip64 = false;
    for (std::uint64_t x = 0; x + 4 <= extra_size;) {
      const char* field = c + kCentralSize + name_size + x;
      const std::uint16_t id = get_le<std::uint16_t>(field), field_size = get_le<std::uint16_t>(field + 2);
      if (x + 4 + field_size > extra_size) throw IoError(member + ": an extra field runs past the entry's extra data");
      if (id == kZip64ExtraId && needs_zip64) {
        found_zip64 = true;
        std::uint64_t used = 0;
        auto take = [&](std::uint64_t& value, std::size_t width, const char* what) {
          if (used + width > field_size)
            throw IoError(message(member, ": the ZIP64 extra field (", field_size, " bytes) lacks the ", what));
          value = width == 8 ? get_le<std::uint64_t>(field + 4 + used) : get_le<std::uint32_t>(field + 4 + used);
          used += width;
        };
        if (entry.size == kFull32) take(entry.size, 8, "size");
        if (entry.compressed_size == kFull32) take(entry.compressed_size, 8, "compressed size");
        if (entry.offset == kFull32) take(entry.offset, 8, "local header offset");
        if (start_disk == kFull16) {
          std::uint64_t d = 0;
          take(d, 4, "disk number");
          start_disk = static_cast<std::uint32_t>(d);
        }
      }
      x += 4 + field_size;
    }
    if (needs_zip64 && !found_zip64)
      throw IoError(member + ": sizes or offset are 0xFFFFFFFF but the entry has no ZIP64 extra field");
    if ((entry.flags & 1) != 0 || (entry.flags & (1 << 6)) != 0 || entry.method == 99)
      throw ValueError(member + " is encrypted, which is not supported");
    if (entry.method != kStored && entry.method != kDeflated)
      throw ValueError(
          message(member, ": compression method ", entry.method, " is not supported (0, stored, and 8, deflate, are)"));
    if (start_disk != 0) throw ValueError(message(member, " starts on disk ", start_disk, ": not supported"));
    if (entry.name.size() <= 4 || entry.name.compare(entry.name.size() - 4, 4, ".npy") != 0)
      throw ValueError(member + " is not named '<name>.npy', so it is not an array of np.savez");
    if (!seen.insert(entry.name).second) throw ValueError(member + " appears twice in the archive");
    directory.entries.push_back(std::move(entry));
    pos += kCentralSize + name_size + extra_size + comment_size;
  }
  return directory;
}

// The uncompressed bytes of one member, checked against the local header and the CRC-32.
std::string read_member(std::string_view file, const ZipEntry& entry, std::uint64_t data_limit,
                        const std::string& where) {
  const std::uint64_t at = entry.offset;
  if (at > data_limit || data_limit - at < kLocalSize || get_le<std::uint32_t>(file.data() + at) != kLocalSignature)
    throw IoError(message(where, ": no local header at offset ", at));
  const char* l = file.data() + at;
  const std::uint64_t name_size = get_le<std::uint16_t>(l + 26), extra_size = get_le<std::uint16_t>(l + 28);
  const std::uint64_t begin = at + kLocalSize + name_size + extra_size;
  if (begin > data_limit || data_limit - begin < entry.compressed_size)
    throw IoError(message(where, ": its data (offset ", begin, ", ", entry.compressed_size, " bytes) runs past the ",
                          data_limit, " bytes before the central directory"));
  if (std::string_view(l + kLocalSize, name_size) != entry.name)
    throw IoError(where + ": the local header names it " + shown(std::string_view(l + kLocalSize, name_size)));
  const std::string_view stored = file.substr(begin, entry.compressed_size);
  std::string data;
  if (entry.method == kStored) {
    if (entry.compressed_size != entry.size)
      throw IoError(message(where, ": stored, but its compressed size ", entry.compressed_size,
                            " differs from its size ", entry.size));
    data = std::string(stored);
  } else {
    // Checked before allocating: a size no deflate stream of this length can produce.
    if (entry.size > entry.compressed_size * kMaxDeflateRatio + 64)
      throw IoError(message(where, ": the directory states ", entry.size, " bytes from ", entry.compressed_size,
                            " compressed ones, more than deflate can produce"));
    data = inflate_raw(stored, entry.size, where);
  }
  const std::uint32_t crc = crc32_of({data});
  if (crc != entry.crc)
    throw IoError(where + ": CRC-32 mismatch: the directory says " + hex32(entry.crc) + ", the data has " + hex32(crc) +
                  ": the archive is corrupt");
  return data;
}

}  // namespace

void save_npy(const std::string& path, const Tensor& tensor) {
  if (!tensor.defined()) throw ValueError("save_npy: the tensor is undefined (file " + path + ")");
  const EncodedNpy npy = encode_npy(tensor, "save_npy");
  with_caller("save_npy", [&] { write_file_atomic(path, {npy.header, npy.data}); });
}

Tensor load_npy(const std::string& path) {
  const std::string file = with_caller("load_npy", [&] { return read_file(path); });
  return decode_npy(file, "load_npy: " + path);
}

void save_npz(const std::string& path, const NamedTensors& arrays, bool compressed) {
  // Every check that can fail happens before the file is touched.
  std::set<std::string> seen;
  for (const auto& [name, t] : arrays) {
    if (name.empty()) throw ValueError("save_npz: empty array name (file " + path + ")");
    if (!seen.insert(name).second)
      throw ValueError("save_npz: duplicate array name " + shown(name) + " (file " + path + ")");
    if (name.size() + 4 > kFull16)
      throw ValueError(message("save_npz: the array name ", shown(name), " has ", name.size(),
                               " bytes, more than a ZIP member name can hold (file ", path, ")"));
    if (!t.defined()) throw ValueError("save_npz: array " + shown(name) + " is undefined (file " + path + ")");
  }
  // Each member is a .npy file, stored as its header and the tensor's own bytes (no copy) or deflated.
  // Every member has ZIP64 sizes and offset and the archive a ZIP64 end record, whatever their size.
  std::vector<EncodedNpy> npys;
  std::vector<std::string> deflated(compressed ? arrays.size() : 0);
  std::vector<std::string> headers;  // local header of each member, then the central directory and the end
  std::string directory;
  std::vector<std::string_view> chunks;
  npys.reserve(arrays.size());
  headers.reserve(arrays.size());
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    const std::string name = arrays[i].first + ".npy";
    npys.push_back(encode_npy(arrays[i].second, "save_npz"));
    const std::vector<std::string_view> pieces{npys[i].header, npys[i].data};
    const std::uint32_t crc = crc32_of(pieces);
    const std::uint64_t size = npys[i].header.size() + npys[i].data.size();
    if (compressed) {
      deflated[i] = deflate_raw(pieces, "save_npz: " + path + ": member " + shown(name));
      npys[i] = EncodedNpy();  // the deflated copy is what gets written: free the contiguous one
    }
    const std::uint64_t compressed_size = compressed ? deflated[i].size() : size;
    const std::uint16_t flags = is_ascii(name) ? 0 : kUtf8Flag;
    const std::uint16_t method = compressed ? kDeflated : kStored;

    std::string& local = headers.emplace_back();
    put_le<std::uint32_t>(local, kLocalSignature);
    put_le<std::uint16_t>(local, kZip64Version);
    put_le<std::uint16_t>(local, flags);
    put_le<std::uint16_t>(local, method);
    put_le<std::uint16_t>(local, 0);  // time 00:00
    put_le<std::uint16_t>(local, kDate1980);
    put_le<std::uint32_t>(local, crc);
    put_le<std::uint32_t>(local, kFull32);  // compressed size and size: in the ZIP64 field
    put_le<std::uint32_t>(local, kFull32);
    put_le<std::uint16_t>(local, static_cast<std::uint16_t>(name.size()));
    put_le<std::uint16_t>(local, 4 + 16);
    local += name;
    put_le<std::uint16_t>(local, kZip64ExtraId);
    put_le<std::uint16_t>(local, 16);
    put_le<std::uint64_t>(local, size);
    put_le<std::uint64_t>(local, compressed_size);

    put_le<std::uint32_t>(directory, kCentralSignature);
    put_le<std::uint16_t>(directory, kMadeBy);
    put_le<std::uint16_t>(directory, kZip64Version);
    put_le<std::uint16_t>(directory, flags);
    put_le<std::uint16_t>(directory, method);
    put_le<std::uint16_t>(directory, 0);
    put_le<std::uint16_t>(directory, kDate1980);
    put_le<std::uint32_t>(directory, crc);
    put_le<std::uint32_t>(directory, kFull32);  // compressed size, size and offset: in the ZIP64 field
    put_le<std::uint32_t>(directory, kFull32);
    put_le<std::uint16_t>(directory, static_cast<std::uint16_t>(name.size()));
    put_le<std::uint16_t>(directory, 4 + 24);
    put_le<std::uint16_t>(directory, 0);               // comment length
    put_le<std::uint16_t>(directory, 0);               // disk
    put_le<std::uint16_t>(directory, 0);               // internal attributes
    put_le<std::uint32_t>(directory, 0100644u << 16);  // a regular file, rw-r--r--
    put_le<std::uint32_t>(directory, kFull32);
    directory += name;
    put_le<std::uint16_t>(directory, kZip64ExtraId);
    put_le<std::uint16_t>(directory, 24);
    put_le<std::uint64_t>(directory, size);
    put_le<std::uint64_t>(directory, compressed_size);
    put_le<std::uint64_t>(directory, offset);

    offset += local.size() + compressed_size;
  }
  const std::uint64_t count = arrays.size();
  const std::uint64_t directory_offset = offset;
  const std::uint64_t end64_offset = directory_offset + directory.size();
  std::string& end = headers.emplace_back();
  put_le<std::uint32_t>(end, kEnd64Signature);
  put_le<std::uint64_t>(end, kEnd64Size - 12);  // the size of the rest of the record
  put_le<std::uint16_t>(end, kMadeBy);
  put_le<std::uint16_t>(end, kZip64Version);
  put_le<std::uint32_t>(end, 0);  // this disk, the directory's disk
  put_le<std::uint32_t>(end, 0);
  put_le<std::uint64_t>(end, count);
  put_le<std::uint64_t>(end, count);
  put_le<std::uint64_t>(end, directory.size());
  put_le<std::uint64_t>(end, directory_offset);
  put_le<std::uint32_t>(end, kLocator64Signature);
  put_le<std::uint32_t>(end, 0);
  put_le<std::uint64_t>(end, end64_offset);
  put_le<std::uint32_t>(end, 1);  // disks in all
  put_le<std::uint32_t>(end, kEndSignature);
  put_le<std::uint16_t>(end, 0);
  put_le<std::uint16_t>(end, 0);
  put_le<std::uint16_t>(end, static_cast<std::uint16_t>(std::min<std::uint64_t>(count, kFull16)));
  put_le<std::uint16_t>(end, static_cast<std::uint16_t>(std::min<std::uint64_t>(count, kFull16)));
  put_le<std::uint32_t>(end, static_cast<std::uint32_t>(std::min<std::uint64_t>(directory.size(), kFull32)));
  put_le<std::uint32_t>(end, static_cast<std::uint32_t>(std::min<std::uint64_t>(directory_offset, kFull32)));
  put_le<std::uint16_t>(end, 0);  // comment length

  for (std::size_t i = 0; i < arrays.size(); ++i) {
    chunks.push_back(headers[i]);
    if (compressed) {
      chunks.push_back(deflated[i]);
    } else {
      chunks.push_back(npys[i].header);
      chunks.push_back(npys[i].data);
    }
  }
  chunks.push_back(directory);
  chunks.push_back(end);
  with_caller("save_npz", [&] { write_file_atomic(path, chunks); });
}

NamedTensors load_npz(const std::string& path) {
  const std::string file = with_caller("load_npz", [&] { return read_file(path); });
  const std::string where = "load_npz: " + path;
  const ZipDirectory directory = read_directory(file, where);
  NamedTensors out;
  out.reserve(directory.entries.size());
  for (const ZipEntry& entry : directory.entries) {
    const std::string member = where + ": member " + shown(entry.name);
    const std::string data = read_member(file, entry, directory.offset, member);
    out.emplace_back(entry.name.substr(0, entry.name.size() - 4), decode_npy(data, member));
  }
  return out;
}

}  // namespace tapegrad::io
