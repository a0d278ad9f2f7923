#pragma once
// Durable file writes: a file is replaced whole or not at all, and once a call returns the new
// contents survive a crash or a power cut. The one place in tapegrad that writes with fsync.
//
//   io::write_file_atomic("runs/x/summary.json", text);
//
// write_file_atomic writes "<path>.tmp.<pid>.<n>" in the same directory (so the rename stays on
// one file system), fsyncs it, renames it over path and fsyncs the directory. Any failure
// removes the temporary file, leaves path as it was, and throws IoError naming the file and
// the system's reason (strerror).

#include <string>
#include <string_view>
#include <vector>

namespace tapegrad::io {

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

// The directory holding path ("." for a bare file name).
std::string parent_directory(const std::string& path);

}  // namespace tapegrad::io
