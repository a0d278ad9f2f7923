// TensorBoard event files: protobuf encoding of Events, TFRecord framing with CRC-32C, the file. See tensorboard.h.

#include "tapegrad/train/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "tapegrad/autograd/error.h"

namespace tapegrad::train {

namespace {

namespace fs = std::filesystem;

constexpr const char* kFileVersion = "brain.Event:2";
// When add_scalar writes the buffer out by itself: TensorBoard reloads a run every 5 seconds by default.
constexpr std::size_t kFlushBytes = 64 * 1024;
constexpr std::chrono::seconds kFlushInterval{5};

// ---------------------------------------------------------------- CRC-32C

constexpr std::uint32_t kCastagnoli = 0x82F63B78u;  // reflected

constexpr std::array<std::uint32_t, 256> crc32c_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t byte = 0; byte < 256; ++byte) {
    std::uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1u) ? (crc >> 1) ^ kCastagnoli : crc >> 1;
    table[byte] = crc;
  }
  return table;
}

constexpr std::array<std::uint32_t, 256> kCrc32cTable = crc32c_table();

// TFRecord stores a rotated and offset CRC: a plain CRC of data that itself holds CRCs is weak.
std::uint32_t masked_crc32c(std::string_view bytes) {
  const std::uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

// ---------------------------------------------------------------- protobuf encoding

enum WireType : std::uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void put_key(std::string& out, std::uint32_t field, WireType type) { put_varint(out, (field << 3) | type); }

// The low `bytes` bytes of value, little-endian whatever the machine's byte order.
void put_little_endian(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void put_double(std::string& out, std::uint32_t field, double value) {
  std::uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, kFixed64);
  put_little_endian(out, bits, 8);
}

void put_float(std::string& out, std::uint32_t field, float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, kFixed32);
  put_little_endian(out, bits, 4);
}

void put_bytes(std::string& out, std::uint32_t field, std::string_view bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// Field numbers of tensorflow.Event, Summary and Summary.Value.
constexpr std::uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5,
                        kEventSessionLog = 6;
constexpr std::uint32_t kSessionLogStatus = 1, kSessionStart = 1;
constexpr std::uint32_t kSummaryValue = 1;
constexpr std::uint32_t kValueTag = 1, kValueSimpleValue = 2;

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string file_version_event(double wall_time) {
  std::string event;
  put_double(event, kEventWallTime, wall_time);
  put_bytes(event, kEventFileVersion, kFileVersion);
  return event;
}

// An Event's wall time and step (left out at 0, as proto3 does).
std::string event_head(double wall_time, std::int64_t step) {
  std::string event;
  put_double(event, kEventWallTime, wall_time);
  // int64 is a varint of the two's complement: a negative step takes ten bytes.
  if (step != 0) {
    put_key(event, kEventStep, kVarint);
    put_varint(event, static_cast<std::uint64_t>(step));
  }
  return event;
}

std::string scalar_event(double wall_time, std::int64_t step, const std::string& tag, float value) {
  std::string summary_value;
  put_bytes(summary_value, kValueTag, tag);
  put_float(summary_value, kValueSimpleValue, value);  // in a oneof: written even when 0
  std::string summary;
  put_bytes(summary, kSummaryValue, summary_value);
  std::string event = event_head(wall_time, step);
  put_bytes(event, kEventSummary, summary);
  return event;
}

std::string session_start_event(double wall_time, std::int64_t step) {
  std::string session_log;
  put_key(session_log, kSessionLogStatus, kVarint);
  put_varint(session_log, kSessionStart);
  std::string event = event_head(wall_time, step);
  put_bytes(event, kEventSessionLog, session_log);
  return event;
}

// ---------------------------------------------------------------- the file

std::string errno_text() { return std::strerror(errno); }

std::string hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// Creates the event file (never opening one that exists) and returns its descriptor.
int create_event_file(const std::string& log_dir, std::string& path) {
  // Numbers the files of one process whose first choice of name was taken (two writers in one second).
  static std::atomic<unsigned long> counter{0};
  // The seconds of the same clock as the events' wall times: std::time reads the kernel's coarse
  // clock, which can still show the previous second just after the system clock has passed it.
  const auto seconds = static_cast<long long>(wall_time_now());
  const std::string base =
      (fs::path(log_dir) / ("events.out.tfevents." + std::to_string(seconds) + "." + hostname())).string();
  path = base;
  for (int attempt = 0;; ++attempt) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) return fd;
    if (errno != EEXIST || attempt == 1000) throw IoError("SummaryWriter: cannot create " + path + ": " + errno_text());
    path = base + "." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  }
}

}  // namespace

std::uint32_t crc32c(std::string_view bytes) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (const char c : bytes) crc = kCrc32cTable[(crc ^ static_cast<unsigned char>(c)) & 0xff] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

SummaryWriter::SummaryWriter(const std::string& log_dir) {
  if (log_dir.empty()) throw ValueError("SummaryWriter: log_dir is empty");
  std::error_code ec;
  fs::create_directories(log_dir, ec);
  if (ec) throw IoError("SummaryWriter: cannot create the directory " + log_dir + ": " + ec.message());
  fd_ = create_event_file(log_dir, path_);
  append(file_version_event(wall_time_now()));
  try {
    flush();
  } catch (...) {
    ::close(fd_);
    ::unlink(path_.c_str());
    throw;
  }
}

SummaryWriter::~SummaryWriter() {
  try {
    flush();
  } catch (...) {
    // A destructor must not throw; flush() reports the failure to a caller who asks.
  }
  ::close(fd_);
}

void SummaryWriter::append(const std::string& event) {
  std::string length;
  put_little_endian(length, event.size(), 8);
  pending_ += length;
  put_little_endian(pending_, masked_crc32c(length), 4);
  pending_ += event;
  put_little_endian(pending_, masked_crc32c(event), 4);
}

void SummaryWriter::add_scalar(const std::string& tag, double value, std::int64_t step) {
  if (tag.empty()) throw ValueError(message("SummaryWriter::add_scalar: empty tag at step ", step));
  append(scalar_event(wall_time_now(), step, tag, static_cast<float>(value)));
  if (pending_.size() >= kFlushBytes || std::chrono::steady_clock::now() - last_write_ >= kFlushInterval) flush();
}

void SummaryWriter::add_session_start(std::int64_t step) {
  append(session_start_event(wall_time_now(), step));
  flush();
}

void SummaryWriter::flush() {
  // Written at the offset where the complete records end, not appended: after a failed write the next
  // flush writes the same records (and any added since) over whatever part of them reached the file.
  std::size_t done = 0;
  while (done < pending_.size()) {
    const ssize_t n = ::pwrite(fd_, pending_.data() + done, pending_.size() - done,
                               static_cast<off_t>(written_ + static_cast<std::uint64_t>(done)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string reason = n < 0 ? errno_text() : std::string("no bytes written");
      // Best effort: a record torn here would end the file for readers until a later flush rewrites it.
      const int truncated = ::ftruncate(fd_, static_cast<off_t>(written_));
      static_cast<void>(truncated);
      throw IoError("SummaryWriter: cannot write " + path_ + ": " + reason);
    }
    done += static_cast<std::size_t>(n);
  }
  written_ += pending_.size();
  pending_.clear();
  last_write_ = std::chrono::steady_clock::now();
}

}  // namespace tapegrad::train
