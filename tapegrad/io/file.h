#pragma once
// Whole-file reads, and durable file writes: a file is replaced whole or not at all, and once a
// call returns the new contents survive a crash or a power cut. The one place in tapegrad that
// reads a file whole or writes with fsync.
//
//   std::string text = io::read_file("runs/x/config.json");
//   io::write_file_atomic("runs/x/summary.json", text);
//
// write_file_atomic writes "<path>.tmp.<pid>.<n>" in the same directory (so the rename stays on
// one file system), fsyncs it, renames it over path and fsyncs the directory. A failure before the
// rename removes the temporary file, leaves path as it was, and throws IoError naming the file and
// the system's reason (strerror); one in the directory's fsync, after it, says path was replaced.
// An empty path, or one ending in '/', is an IoError before anything is written.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tapegrad/autograd/error.h"

namespace tapegrad::io {

// What read_file does with a file larger than its max_bytes.
enum class Oversize { Refuse, ReadHead };

// The whole contents of path. IoError naming the file when it cannot be opened, is a directory
// or another non-regular file, or a read fails (strerror's reason); a file larger than max_bytes
// is an IoError too (Oversize::Refuse), or only its first max_bytes are read (Oversize::ReadHead).
std::string read_file(const std::string& path, std::uint64_t max_bytes = std::uint64_t{1} << 34,
                      Oversize oversize = Oversize::Refuse);

// Replaces path by bytes atomically and durably.
void write_file_atomic(const std::string& path, std::string_view bytes);
// The same with the contents given in pieces, written in order (no copy into one buffer).
void write_file_atomic(const std::string& path, const std::vector<std::string_view>& chunks);

// Creates or truncates path, writes bytes and fsyncs the file, without a rename: for files inside
// a directory that is itself renamed into place once complete (see sync_directory).
void write_file_synced(const std::string& path, std::string_view bytes);

// fsyncs a directory, which makes the creations, renames and removals inside it durable.
// File systems that cannot sync a directory (EINVAL) are not an error.
void sync_directory(const std::string& path);

// rename(2): IoError naming both paths and the reason when it fails.
void rename_path(const std::string& from, const std::string& to);

// The CRC-32 of bytes (zlib's: the polynomial of gzip and PNG) as 8 lowercase hex digits, the form
// checkpoint files store their checksums in.
std::string crc32_hex(std::string_view bytes);

// The directory holding path ("." for a bare file name).
std::string parent_directory(const std::string& path);

// Runs f and returns what it returns; an IoError from f (this layer's, naming the file and the
// reason) comes out with "<caller>: " before its message, so the errors of a loader built on
// read_file or write_file_atomic name the loader:
//   std::string bytes = io::with_caller("load_npy", [&] { return io::read_file(path); });
template <class F>
auto with_caller(std::string_view caller, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const IoError& e) {
    throw IoError(message(caller, ": ", e.what()));
  }
}

}  // namespace tapegrad::io
