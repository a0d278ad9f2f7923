// Whole-file reads and durable file writes (POSIX open/read/write/fsync/rename). See file.h.

#include "tapegrad/io/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "tapegrad/autograd/error.h"

namespace tapegrad::io {

namespace {

// strerror of the current errno (building the rest of a message allocates, which leaves errno alone).
std::string errno_text() { return std::strerror(errno); }

// An open file descriptor, closed on scope exit unless close() was called (and checked).
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // The result of close(2); the descriptor is released either way.
  bool close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

void write_all(int fd, std::string_view bytes, const std::string& path) {
  const char* data = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t written = ::write(fd, data, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      throw IoError("cannot write " + path + ": " + errno_text());
    }
    data += written;
    left -= static_cast<std::size_t>(written);
  }
}

// Writes the chunks to path (opened with `flags`) and fsyncs it.
void write_and_sync(const std::string& path, const std::vector<std::string_view>& chunks, int flags) {
  Fd fd(::open(path.c_str(), flags | O_WRONLY | O_CLOEXEC, 0644));
  if (fd.get() < 0) throw IoError("cannot create " + path + ": " + errno_text());
  for (const std::string_view chunk : chunks) write_all(fd.get(), chunk, path);
  if (::fsync(fd.get()) != 0) throw IoError("cannot fsync " + path + ": " + errno_text());
  if (!fd.close()) throw IoError("cannot close " + path + ": " + errno_text());
}

}  // namespace

std::string read_file(const std::string& path, std::uint64_t max_bytes, Oversize oversize) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer before the check below can refuse it.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) throw IoError("cannot open " + path + ": " + errno_text());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw IoError("cannot stat " + path + ": " + errno_text());
  if (S_ISDIR(st.st_mode)) throw IoError("cannot read " + path + ": it is a directory, not a file");
  if (!S_ISREG(st.st_mode)) throw IoError("cannot read " + path + ": not a regular file");
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0)
    throw IoError("cannot read " + path + ": " + errno_text());
  std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes && oversize == Oversize::ReadHead) size = max_bytes;
  if (size > max_bytes)
    throw IoError(message("cannot read ", path, ": the file is ", size, " bytes, more than the limit of ", max_bytes));
  std::string out(static_cast<std::size_t>(size), '\0');
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd.get(), out.data() + got, out.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError("cannot read " + path + ": " + errno_text());
    }
    if (n == 0) break;  // the file shrank while being read
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  return out;
}

std::string crc32_hex(std::string_view bytes) {
  const uLong crc = ::crc32_z(0L, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size());
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08lx", crc & 0xffffffffUL);
  return hex;
}

std::string parent_directory(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  write_file_atomic(path, std::vector<std::string_view>{bytes});
}

void write_file_atomic(const std::string& path, const std::vector<std::string_view>& chunks) {
  // The counter keeps two writes of one process (from different threads) off each other's file.
  static std::atomic<unsigned long> counter{0};
  if (path.empty() || path.back() == '/') throw IoError("cannot write '" + path + "': the path names no file");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  try {
    write_and_sync(tmp, chunks, O_CREAT | O_EXCL);
    rename_path(tmp, path);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  try {
    sync_directory(parent_directory(path));
  } catch (const IoError& e) {
    throw IoError(std::string(e.what()) + " (" + path +
                  " was already replaced; the replacement may not survive a crash)");
  }
}

void write_file_synced(const std::string& path, std::string_view bytes) {
  write_and_sync(path, {bytes}, O_CREAT | O_TRUNC);
}

void sync_directory(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) throw IoError("cannot open the directory " + path + " to fsync it: " + errno_text());
  if (::fsync(fd.get()) != 0 && errno != EINVAL)
    throw IoError("cannot fsync the directory " + path + ": " + errno_text());
}

void rename_path(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    throw IoError("cannot rename " + from + " to " + to + ": " + errno_text());
}

}  // namespace tapegrad::io
