// safetensors reading and writing. See safetensors.h for the layout.

#include "tapegrad/io/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tapegrad/autograd/error.h"
#include "tapegrad/io/file.h"
#include "tapegrad/io/json.h"

// The data buffer is little-endian; tensors are stored in host order, so the host must be too.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "tapegrad safetensors I/O assumes a little-endian host");

namespace tapegrad::io {

namespace {

using json = nlohmann::json;

// A header larger than this is refused before reading it (the limit the reference reader uses).
constexpr std::uint64_t kMaxHeaderBytes = 100000000;

// The metadata key holding a tensor's checksum.
constexpr std::string_view kChecksumPrefix = "tapegrad.crc32.";

// A tensor name or dtype from a file, quoted and cut short for a message.
std::string shown(const std::string& text) {
  return "'" + (text.size() > 80 ? text.substr(0, 77) + "..." : text) + "'";
}

bool is_checksum_key(const std::string& key) { return key.compare(0, kChecksumPrefix.size(), kChecksumPrefix) == 0; }

const char* file_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return "F32";
    case DType::Float64:
      return "F64";
    case DType::Int64:
      return "I64";
    case DType::Bool:
      return "BOOL";
    case DType::BFloat16:
      return "BF16";
  }
  return "?";
}

bool parse_file_dtype(const std::string& name, DType& out) {
  if (name == "F32") out = DType::Float32;
  else if (name == "F64") out = DType::Float64;
  else if (name == "I64") out = DType::Int64;
  else if (name == "BOOL") out = DType::Bool;
  else if (name == "BF16") out = DType::BFloat16;
  else return false;
  return true;
}

// The bytes of a contiguous copy of t (C order).
std::vector<char> tensor_bytes(const Tensor& t) {
  const Tensor c = t.detach().contiguous();
  const std::size_t n = static_cast<std::size_t>(c.numel()) * element_size(c.dtype());
  std::vector<char> bytes(n);
  if (n > 0) {
    const void* src = dispatch_all(c.dtype(), [&](auto tag) -> const void* {
      using T = decltype(tag);
      return c.data_ptr<T>();
    });
    std::memcpy(bytes.data(), src, n);
  }
  return bytes;
}

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
  // Build the header first: every check that can fail happens before the file is touched.
  // ordered_json keeps the header's entries in the given order ("__metadata__" first).
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  Metadata meta = metadata;
  if (meta.find("format") == meta.end()) meta["format"] = "pt";
  for (const auto& entry : metadata)
    if (is_checksum_key(entry.first))
      throw ValueError(message("save_safetensors: metadata key '", entry.first, "' uses the reserved prefix '",
                               kChecksumPrefix, "' (file ", path, ")"));
  header["__metadata__"] = nullptr;  // first in the header; filled in once the checksums are known
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    if (name.empty()) throw ValueError("save_safetensors: empty tensor name (file " + path + ")");
    if (name == "__metadata__") throw ValueError("save_safetensors: '__metadata__' is reserved (file " + path + ")");
    if (!seen.insert(name).second)
      throw ValueError("save_safetensors: duplicate tensor name '" + name + "' (file " + path + ")");
    if (!t.defined()) throw ValueError("save_safetensors: tensor '" + name + "' is undefined (file " + path + ")");
    header[name] = nullptr;  // keeps the given order in the header; filled in below
  }
  std::vector<std::vector<char>> data(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    data[i] = tensor_bytes(tensors[i].second);
    meta[std::string(kChecksumPrefix) + tensors[i].first] = crc32_hex(std::string_view(data[i].data(), data[i].size()));
  }
  header["__metadata__"] = meta;
  // The data goes in order of decreasing element size (stable): with the header padded to 8 bytes,
  // every tensor then starts at a multiple of its element size, so a reader may map it in place.
  std::vector<std::size_t> order(tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return element_size(tensors[a].second.dtype()) > element_size(tensors[b].second.dtype());
  });
  std::uint64_t offset = 0;
  for (const std::size_t i : order) {
    const auto& [name, t] = tensors[i];
    const std::uint64_t nbytes = static_cast<std::uint64_t>(t.numel()) * element_size(t.dtype());
    header[name] = {
        {"dtype", file_dtype_name(t.dtype())}, {"shape", t.shape().vec()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // a name or metadata string that is not UTF-8
    throw ValueError("save_safetensors: a tensor name or metadata string is not valid UTF-8 (file " + path + ")");
  }
  while (text.size() % 8 != 0) text.push_back(' ');
  const std::uint64_t n = text.size();
  if (n > kMaxHeaderBytes)  // load_safetensors would refuse the file
    throw ValueError(message("save_safetensors: the header (names, shapes, offsets and metadata) is ", n,
                             " bytes, more than the limit of ", kMaxHeaderBytes, " (file ", path, ")"));
  char len_bytes[8];
  std::memcpy(len_bytes, &n, 8);  // little-endian host (static_assert above)

  std::vector<std::string_view> chunks{{len_bytes, 8}, text};
  for (const std::size_t i : order) chunks.emplace_back(data[i].data(), data[i].size());
  with_caller("save_safetensors", [&] { write_file_atomic(path, chunks); });
}

SafetensorsFile load_safetensors(const std::string& path) {
  const std::string where = "load_safetensors: " + path + ": ";
  // Read the whole file: checkpoints here are small, and bounds are then checked against one buffer.
  std::string file = with_caller("load_safetensors", [&] { return read_file(path); });
  const std::uint64_t size = file.size();
  if (size < 8) throw IoError(message(where, "file is ", size, " bytes, shorter than the 8-byte header length"));
  std::uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  if (n > kMaxHeaderBytes) throw IoError(message(where, "header length ", n, " exceeds the limit ", kMaxHeaderBytes));
  if (n > size - 8)
    throw IoError(message(where, "header length ", n, " exceeds the ", size - 8, " bytes after the length field"));

  // parse_json refuses duplicate keys (nlohmann alone would keep the last one) and deep nesting.
  const json header = parse_json(std::string_view(file).substr(8, n), "load_safetensors: " + path + ": header");
  if (!header.is_object()) throw IoError(where + "header is not a JSON object");

  SafetensorsFile out;
  std::map<std::string, std::string> checksums;  // tensor name -> stored CRC-32
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<std::int64_t> shape;
    std::uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) throw IoError(where + "__metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string())
          throw IoError(where + "__metadata__ value for " + shown(k) + " is not a string: " + json_excerpt(v));
        if (is_checksum_key(k)) checksums[k.substr(kChecksumPrefix.size())] = v.get<std::string>();
        else out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string at = where + "tensor " + shown(name) + ": ";
    if (!value.is_object()) throw IoError(at + "entry is not an object: " + json_excerpt(value));
    if (!value.contains("dtype") || !value["dtype"].is_string()) throw IoError(at + "missing or non-string dtype");
    Entry e;
    e.name = name;
    const std::string dt = value["dtype"].get<std::string>();
    if (!parse_file_dtype(dt, e.dtype))
      throw IoError(at + "unsupported dtype " + shown(dt) + " (expected F32, F64, BF16, I64 or BOOL)");
    if (!value.contains("shape") || !value["shape"].is_array()) throw IoError(at + "missing or non-array shape");
    const json& shape = value["shape"];
    if (shape.size() > static_cast<std::size_t>(kMaxRank))
      throw IoError(message(at, "shape ", json_excerpt(shape), " has more than ", kMaxRank, " dimensions"));
    // The element count and the extent (the product with zeros counted as 1, which bounds the
    // strides of a tensor of this shape) must stay far below 2^63; checked before multiplying.
    std::uint64_t numel = 1, extent = 1;
    const std::uint64_t kLimit = std::uint64_t{1} << 59;
    for (const json& d : shape) {
      if (!d.is_number_unsigned())
        throw IoError(at + "shape " + json_excerpt(shape) + " has an entry that is not a non-negative integer");
      const std::uint64_t v = d.get<std::uint64_t>();
      if (extent > kLimit / std::max<std::uint64_t>(v, 1))
        throw IoError(at + "shape " + json_excerpt(shape) + " is too large");
      extent *= std::max<std::uint64_t>(v, 1);
      numel *= v;
      e.shape.push_back(static_cast<std::int64_t>(v));
    }
    if (!value.contains("data_offsets")) throw IoError(at + "missing data_offsets");
    const json& offs = value["data_offsets"];
    if (!offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
      throw IoError(at + "data_offsets " + json_excerpt(offs) + " is not two non-negative integers");
    e.begin = offs[0].get<std::uint64_t>();
    e.end = offs[1].get<std::uint64_t>();
    if (e.end < e.begin) throw IoError(at + "data_offsets " + json_excerpt(offs) + " end < begin");
    const std::uint64_t expected = numel * element_size(e.dtype);  // numel <= 2^59: no wrap
    if (e.end - e.begin != expected)
      throw IoError(message(at, "data_offsets ", json_excerpt(offs), " span ", e.end - e.begin, " bytes, but shape ",
                            json_excerpt(shape), " of ", dt, " needs ", expected));
    entries.push_back(std::move(e));
  }
  // Sorted by offset, the entries must tile [0, buffer size) exactly.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t expected_begin = 0;
  for (const Entry& e : entries) {
    if (e.begin != expected_begin)
      throw IoError(message(where, "tensor ", shown(e.name), ": data_offsets begin ", e.begin,
                            " but the previous tensor ends at ", expected_begin,
                            (e.begin < expected_begin ? " (overlap)" : " (gap)")));
    expected_begin = e.end;
  }
  const std::uint64_t buffer = size - 8 - n;
  if (expected_begin != buffer)
    throw IoError(message(where, "tensors cover ", expected_begin, " bytes of data but the file holds ", buffer,
                          " (8 + ", n, " + ", expected_begin, " != file size ", size, ")"));

  const char* data = file.data() + 8 + n;
  if (!checksums.empty()) {
    for (const Entry& e : entries) {
      const auto it = checksums.find(e.name);
      if (it == checksums.end())
        throw IoError(message(where, "tensor ", shown(e.name), " has no checksum, while the file has checksums for ",
                              checksums.size(), " tensors"));
      const std::string actual = crc32_hex(std::string_view(data + e.begin, static_cast<std::size_t>(e.end - e.begin)));
      if (it->second != actual)
        throw IoError(where + "tensor " + shown(e.name) + ": checksum mismatch: the metadata says CRC-32 " +
                      json_excerpt(json(it->second), 20) + ", the data has " + actual + ": the file is corrupt");
      checksums.erase(it);
    }
    if (!checksums.empty())
      throw IoError(where + "metadata holds a checksum for " + json_excerpt(json(checksums.begin()->first)) +
                    ", which is not a tensor of the file");
  }
  for (const Entry& e : entries) {
    Tensor t = empty(Shape(e.shape), e.dtype);
    const std::size_t nbytes = static_cast<std::size_t>(e.end - e.begin);
    if (e.dtype == DType::Bool) {
      // A bool byte other than 0 or 1 is not a valid bool (reading it would be undefined behaviour).
      for (std::size_t i = 0; i < nbytes; ++i) {
        const unsigned char b = static_cast<unsigned char>(data[e.begin + i]);
        if (b > 1) throw IoError(message(where, "tensor ", shown(e.name), ": BOOL element ", i, " has byte value ", b));
      }
    }
    if (nbytes > 0) {
      void* dst = dispatch_all(e.dtype, [&](auto tag) -> void* {
        using T = decltype(tag);
        return t.data_ptr<T>();
      });
      std::memcpy(dst, data + e.begin, nbytes);
    }
    out.tensors.emplace_back(e.name, t);
  }
  return out;
}

Metadata load_into(const NamedTensors& target, const std::string& path, bool strict) {
  SafetensorsFile file = load_safetensors(path);
  const std::string where = "load_into: " + path + ": ";
  std::map<std::string, const Tensor*> loaded;
  for (const auto& [name, t] : file.tensors) loaded[name] = &t;
  std::set<std::string> wanted;
  // Check everything before copying anything, so a mismatch leaves target unchanged.
  for (const auto& [name, t] : target) {
    if (!t.defined()) throw ValueError(where + "the target's tensor '" + name + "' is undefined");
    wanted.insert(name);
    const auto it = loaded.find(name);
    if (it == loaded.end()) {
      if (strict) throw ValueError(where + "missing tensor '" + name + "'");
      continue;
    }
    if (!(it->second->shape() == t.shape()))
      throw ShapeError(where + "tensor '" + name + "' has shape " + it->second->shape().str() +
                       " in the file, expected " + t.shape().str());
    if (it->second->dtype() != t.dtype())
      throw TypeError(where + "tensor '" + name + "' has dtype " + dtype_name(it->second->dtype()) +
                      " in the file, expected " + dtype_name(t.dtype()));
  }
  if (strict)
    for (const auto& [name, t] : file.tensors)
      if (!wanted.count(name)) throw ValueError(where + "unexpected tensor '" + name + "' in the file");
  NoGradGuard no_grad;
  for (const auto& [name, t] : target) {
    const auto it = loaded.find(name);
    if (it != loaded.end()) t.copy_(*it->second);
  }
  return file.metadata;
}

}  // namespace tapegrad::io
