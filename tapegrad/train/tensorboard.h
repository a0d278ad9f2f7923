#pragma once
// SummaryWriter: scalars (a loss, a learning rate) in a TensorBoard event file, without TensorFlow.
//
//   train::SummaryWriter tb("runs/lm/tb");
//   tb.add_scalar("train/loss", 0.693, 100);   // tag, value, step
//   tb.flush();                                 // also done by the destructor
//   // tensorboard --logdir runs/lm
//
// The file, log_dir/events.out.tfevents.<unix seconds>.<hostname> (".<pid>.<n>" appended when that name is
// taken), is a sequence of TFRecords, each one protobuf-encoded tensorflow.Event:
//   record  uint64 length (little-endian), uint32 masked_crc32c(length bytes), data, uint32 masked_crc32c(data)
//           masked_crc32c(x) = rotate_right(crc32c(x), 15) + 0xa282ead8 (mod 2^32)
//   Event   wall_time = 1 (double, unix seconds), step = 2 (int64), file_version = 3 (string),
//           summary = 5 (Summary: value = 1, repeated Summary.Value: tag = 1 (string), simple_value = 2 (float)),
//           session_log = 6 (SessionLog: status = 1 (enum, START = 1))
// The first record is Event{wall_time, file_version: "brain.Event:2"}; every add_scalar adds
// Event{wall_time, step, summary{value{tag, simple_value}}} (fields at their default, as step 0, are left out,
// as proto3 does).
//
// Records are buffered and written whole, appended to the file by flush(), by the destructor, and by
// add_scalar once the buffer holds 64 KiB or the last write is 5 seconds old (so TensorBoard sees a run as it
// goes). A crash loses the buffered records only: the file always holds complete records, perhaps followed
// by a torn last one, which readers skip. A failed write is cut off the file again. There is no fsync: what a
// flush wrote survives the process, not a power cut. One writer is for one thread at a time.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace tapegrad::train {

class SummaryWriter {
 public:
  // Creates log_dir (and its parents) and the event file, and writes its first record. IoError naming the
  // directory or the file when that fails; ValueError on an empty log_dir.
  explicit SummaryWriter(const std::string& log_dir);
  // Flushes; a failure is ignored (call flush() first to see it).
  ~SummaryWriter();
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  // Adds the point (step, value) to the curve named tag (e.g. "train/loss"); value is stored as a float.
  // ValueError on an empty tag; IoError naming the file when a write it triggers fails.
  void add_scalar(const std::string& tag, double value, std::int64_t step);
  // Marks a start of the run at `step` (Event{step, session_log{status: START}}). TensorBoard then drops
  // the points it read from earlier files of the directory at steps >= step: a run resumed from a checkpoint
  // at step s writes one at s + 1, so the points an interrupted run logged past its checkpoint are not
  // shown twice. IoError naming the file when a write it triggers fails.
  void add_session_start(std::int64_t step);
  // Writes the buffered records to the file. IoError naming the file when that fails.
  void flush();
  // The event file.
  std::string path() const { return path_; }

 private:
  // Appends the TFRecord holding event (a serialised Event) to the buffer.
  void append(const std::string& event);

  std::string path_;
  int fd_ = -1;
  std::string pending_;        // complete records not yet in the file
  std::uint64_t written_ = 0;  // bytes of complete records in the file
  std::chrono::steady_clock::time_point last_write_;
};

// CRC-32C (Castagnoli: the reflected polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF) of bytes,
// the checksum of TFRecord framing. crc32c("123456789") == 0xE3069283.
std::uint32_t crc32c(std::string_view bytes);

}  // namespace tapegrad::train
