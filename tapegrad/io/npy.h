#pragma once
// Tensors in NumPy's .npy and .npz files, the files np.save, np.load, np.savez and np.savez_compressed
// read and write (tests/data/npy holds files NumPy wrote; tests/read_npy.py loads ours with NumPy):
//
//   .npy  "\x93NUMPY", version (major, minor byte), header length (u16 LE in 1.0; u32 LE in 2.0, 3.0),
//         the header: a Python dict literal such as
//           {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
//         padded with spaces and a final '\n' so that the data starts at a multiple of 64 bytes,
//         then the elements (C order unless fortran_order).
//   .npz  a ZIP archive with a member "<name>.npy" per array, stored or deflate-compressed.
//
//   io::save_npy("w.npy", w);                       // np.load("w.npy") in Python
//   Tensor x = io::load_npy("x.npy");              // from np.save("x.npy", x)
//   io::save_npz("state.npz", {{"w", w}, {"b", b}}, /*compressed=*/true);
//   for (const auto& [name, t] : io::load_npz("state.npz")) ...
//
// Writing: format 1.0, byte for byte what np.save writes for the same array (little-endian, C order,
// descr '<f4', '<f8', '<i8' or '|b1'); any tensor, a non-contiguous view in its logical order. Archives
// have fixed timestamps (1980-01-01), so equal arrays give equal files, and ZIP64 size and offset fields
// on every member plus a ZIP64 end record (NumPy writes ZIP64 fields in its local headers too), so the
// layout members over 4 GiB need is the one every file has, and the one the tests and NumPy check.
// Writes go through io::write_file_atomic (file.h): a failed write leaves the previous file as it was.
//
// Reading: versions 1.0, 2.0 and 3.0; descr '<f4' -> float32, '<f8' -> float64, '<i8' -> int64, '|b1' ->
// bool (a nonzero byte is true, as in NumPy), and the integers '|i1' '<i2' '<i4' '|u1' '<u2' '<u4' widened
// to int64; '>' (big-endian) variants are byte-swapped; fortran_order data is reordered into a C-order
// tensor. Loaded tensors are contiguous and need no gradient. Archives: members in archive order, stored
// or deflated, each checked against its CRC-32, ZIP64 sizes and offsets read where present.
//
// Errors name the function, the file (and member), and the field or value at fault:
//   IoError     the file cannot be read or is damaged: truncated anywhere (including data shorter than the
//               shape needs, checked before allocating), no ZIP end-of-central-directory record, an entry
//               outside the file, a local header that disagrees with the directory, a CRC-32 mismatch or
//               a deflate stream that does not decode to the stated size.
//   ValueError  a readable file holding what tapegrad does not load, or a bad argument: not the .npy magic,
//               an unknown version, a header that does not parse or lacks or adds a key, any other dtype
//               (float16, uint64, object '|O', strings, structured ...), more than kMaxRank axes, a shape
//               whose element count overflows, data longer than the shape, an encrypted member, another
//               compression method, a member not named "*.npy" or named twice; on writing, an undefined
//               tensor or an empty, duplicated or over-long name.

#include <string>

#include "tapegrad/autograd/graph.h"

namespace tapegrad::io {

// Writes tensor to path as a .npy file.
void save_npy(const std::string& path, const Tensor& tensor);

// Reads a .npy file.
Tensor load_npy(const std::string& path);

// Writes the arrays to path as a .npz archive whose members are "<name>.npy" in the given order,
// deflate-compressed (np.savez_compressed) or stored (np.savez). np.load(path)[name] reads one back.
void save_npz(const std::string& path, const NamedTensors& arrays, bool compressed = false);

// Reads a .npz archive: (name without ".npy", tensor) for every member, in archive order.
NamedTensors load_npz(const std::string& path);

}  // namespace tapegrad::io
