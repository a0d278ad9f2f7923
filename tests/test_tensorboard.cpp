// tensorboard: CRC-32C, the TFRecord framing and the Event encoding of train::SummaryWriter, read back by a
// reader written here from the format description (its own bit-at-a-time CRC-32C and protobuf decoding).
// tests/tensorboard_check.py reads the file of the last case with protoc-generated Python classes.

#include <doctest/doctest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd/error.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tapegrad/train/train.h"
#include "tests/testing.h"
#include "tests/trainer_testing.h"

using namespace tapegrad;
namespace fs = std::filesystem;
using tapegrad::testing::read_text;
using tapegrad::testing::TempDir;

namespace {

// CRC-32C one bit at a time, as the polynomial division is defined (the library uses a byte table).
std::uint32_t crc32c_bitwise(std::string_view bytes) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (const char c : bytes) {
    crc ^= static_cast<unsigned char>(c);
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

std::uint32_t masked(std::uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

std::uint64_t little_endian(std::string_view bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i)
    value |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  return value;
}

std::string le_bytes(std::uint64_t value, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  return out;
}

// The payloads of a file of TFRecords; every length and data CRC is checked, and the file must end with
// a complete record.
std::vector<std::string> read_records(const std::string& bytes) {
  std::vector<std::string> records;
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    CAPTURE(pos);
    REQUIRE(bytes.size() - pos >= 12);
    const std::string length_bytes = bytes.substr(pos, 8);
    const std::uint64_t length = little_endian(length_bytes);
    REQUIRE(little_endian(bytes.substr(pos + 8, 4)) == masked(crc32c_bitwise(length_bytes)));
    REQUIRE(bytes.size() - pos - 12 >= length + 4);
    const std::string data = bytes.substr(pos + 12, static_cast<std::size_t>(length));
    REQUIRE(little_endian(bytes.substr(pos + 12 + length, 4)) == masked(crc32c_bitwise(data)));
    records.push_back(data);
    pos += 12 + static_cast<std::size_t>(length) + 4;
  }
  return records;
}

// Protobuf wire-format decoding, just enough for Event.
class Fields {
 public:
  explicit Fields(std::string_view bytes) : bytes_(bytes) {}
  bool done() const { return pos_ == bytes_.size(); }
  std::uint64_t varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      REQUIRE(pos_ < bytes_.size());
      const auto byte = static_cast<unsigned char>(bytes_[pos_++]);
      value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    FAIL("a varint longer than 10 bytes");
    return 0;
  }
  std::string_view take(std::size_t n) {
    REQUIRE(bytes_.size() - pos_ >= n);
    const std::string_view out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }

 private:
  std::string_view bytes_;
  std::size_t pos_ = 0;
};

struct Scalar {
  std::string tag;
  float value = 0.0f;
};

struct Event {
  bool has_wall_time = false;
  double wall_time = 0.0;
  std::int64_t step = 0;
  std::string file_version;
  std::vector<Scalar> values;
  std::uint64_t session_status = 0;  // SessionLog.status: 1 = START
};

// Decodes Summary.Value {tag = 1 string, simple_value = 2 float}.
Scalar decode_value(std::string_view bytes) {
  Scalar scalar;
  bool has_value = false;
  Fields f(bytes);
  while (!f.done()) {
    const std::uint64_t key = f.varint();
    if (key == ((1 << 3) | 2)) {
      scalar.tag = std::string(f.take(static_cast<std::size_t>(f.varint())));
    } else if (key == ((2 << 3) | 5)) {
      const auto bits = static_cast<std::uint32_t>(little_endian(f.take(4)));
      std::memcpy(&scalar.value, &bits, 4);
      has_value = true;
    } else {
      FAIL("unexpected Summary.Value key " << key);
    }
  }
  CHECK(has_value);
  return scalar;
}

// Decodes Event {wall_time = 1 double, step = 2 int64, file_version = 3 string, summary = 5 Summary}.
Event decode_event(std::string_view bytes) {
  Event event;
  Fields f(bytes);
  while (!f.done()) {
    const std::uint64_t key = f.varint();
    if (key == ((1 << 3) | 1)) {
      const std::uint64_t bits = little_endian(f.take(8));
      std::memcpy(&event.wall_time, &bits, 8);
      event.has_wall_time = true;
    } else if (key == ((2 << 3) | 0)) {
      event.step = static_cast<std::int64_t>(f.varint());
    } else if (key == ((3 << 3) | 2)) {
      event.file_version = std::string(f.take(static_cast<std::size_t>(f.varint())));
    } else if (key == ((5 << 3) | 2)) {
      Fields summary(f.take(static_cast<std::size_t>(f.varint())));
      while (!summary.done()) {
        REQUIRE(summary.varint() == ((1 << 3) | 2));  // Summary.value
        event.values.push_back(decode_value(summary.take(static_cast<std::size_t>(summary.varint()))));
      }
    } else if (key == ((6 << 3) | 2)) {
      Fields session_log(f.take(static_cast<std::size_t>(f.varint())));
      REQUIRE(session_log.varint() == ((1 << 3) | 0));  // SessionLog.status
      event.session_status = session_log.varint();
      CHECK(session_log.done());
    } else {
      FAIL("unexpected Event key " << key);
    }
  }
  return event;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The events of an event file; the first must be the file version.
std::vector<Event> read_events(const std::string& path) {
  std::vector<Event> events;
  for (const std::string& record : read_records(read_text(path))) events.push_back(decode_event(record));
  REQUIRE(!events.empty());
  CHECK(events[0].file_version == "brain.Event:2");
  CHECK(events[0].values.empty());
  for (const Event& e : events) {
    CHECK(e.has_wall_time);
    CHECK(e.wall_time > now_seconds() - 600.0);
    CHECK(e.wall_time <= now_seconds() + 1.0);
  }
  return events;
}

std::vector<std::string> file_names(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

struct Point {
  std::string tag;
  double value;
  std::int64_t step;
};

// What the file for tests/tensorboard_check.py holds; the script has the same list. Steps 0 (left out of
// the encoding), negative (a ten-byte varint) and beyond 32 bits; values not exact in float, zero, negative,
// a float's extremes; a tag with non-ASCII UTF-8.
constexpr std::int64_t kSessionStartStep = 12;  // tests/tensorboard_check.py's SESSION_START_STEP
const std::vector<Point> kInteropPoints = {
    {"train/loss", 2.5, 0},
    {"train/loss", 0.1, 1},
    {"train/loss", -0.0, 2},
    {"train/lr", 3e-4, 1},
    {"train/lr", -1.0e30, 300},
    {"eval/val_loss", 0.0, 1099511627781},  // 2^40 + 5
    {"eval/val_loss", 1.0e-40, -1},         // a float subnormal
    {"métrique/λ", 123456.789, 16383},      // 16383: the largest two-byte varint
};

}  // namespace

TEST_CASE("tensorboard: crc32c of the standard check value and RFC 3720's test vectors") {
  // The CRC catalogue's check value, and iSCSI's vectors (RFC 3720, B.4: 32 bytes each).
  const std::string zeros(32, '\0'), ones(32, '\xff');
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  const std::vector<std::pair<std::string, std::uint32_t>> vectors = {{"", 0u},
                                                                      {"123456789", 0xE3069283u},
                                                                      {zeros, 0x8A9136AAu},
                                                                      {ones, 0x62A8AB43u},
                                                                      {ascending, 0x46DD794Eu},
                                                                      {descending, 0x113FDB5Cu}};
  for (const auto& [bytes, crc] : vectors) {
    CAPTURE(bytes.size());
    CHECK(train::crc32c(bytes) == crc);
    CHECK(crc32c_bitwise(bytes) == crc);  // the reader's own CRC, used to check the files below
  }
  // Every byte value in every position of the table: the table against the bit-at-a-time division.
  std::string all;
  for (int round = 0; round < 7; ++round)
    for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>((b * 37 + round * 101) & 0xff));
  CHECK(train::crc32c(all) == crc32c_bitwise(all));
  // The masked form of the check value, computed by an independent Python implementation.
  CHECK(masked(train::crc32c("123456789")) == 0xC78AB0E5u);
}

TEST_CASE("tensorboard: the exact bytes of the file version record and of a scalar record") {
  TempDir dir;
  std::string path;
  {
    train::SummaryWriter writer(dir.str());
    path = writer.path();
    writer.add_scalar("loss", 0.5, 3);
  }
  const std::string bytes = read_text(path);
  // Record 1: Event{wall_time = 1 (fixed64), file_version = 3 (13 bytes)}: 1 + 8 + 2 + 13 = 24 bytes.
  REQUIRE(bytes.size() >= 12 + 24 + 4);
  const std::string wall_time_1 = bytes.substr(13, 8);  // after the 12-byte header and the key 0x09
  std::string event_1 = "\x09" + wall_time_1 + "\x1a\x0d" + "brain.Event:2";
  REQUIRE(event_1.size() == 24);
  // The masked CRC of the length bytes of 24, computed by an independent Python implementation.
  CHECK(masked(crc32c_bitwise(le_bytes(24, 8))) == 0x224B7FA3u);
  const std::string record_1 =
      le_bytes(24, 8) + le_bytes(0x224B7FA3u, 4) + event_1 + le_bytes(masked(crc32c_bitwise(event_1)), 4);
  CHECK(bytes.substr(0, record_1.size()) == record_1);

  // Record 2: Event{wall_time, step = 2 (varint 3), summary = 5 {value = 1 {tag = 1 "loss", simple_value = 2
  // (fixed32 0.5f = 0x3f000000)}}}: Value 2 + 4 + 5 = 11 bytes, Summary 2 + 11 = 13, Event 9 + 2 + 2 + 13 = 26.
  const std::size_t second = record_1.size();
  REQUIRE(bytes.size() == second + 12 + 26 + 4);
  const std::string wall_time_2 = bytes.substr(second + 13, 8);
  const std::string event_2 = "\x09" + wall_time_2 + std::string("\x10\x03\x2a\x0d\x0a\x0b\x0a\x04", 8) + "loss" +
                              std::string("\x15\x00\x00\x00\x3f", 5);
  REQUIRE(event_2.size() == 26);
  CHECK(masked(crc32c_bitwise(le_bytes(26, 8))) == 0x2DD89B12u);
  const std::string record_2 =
      le_bytes(26, 8) + le_bytes(0x2DD89B12u, 4) + event_2 + le_bytes(masked(crc32c_bitwise(event_2)), 4);
  CHECK(bytes.substr(second) == record_2);

  // The wall times: unix seconds of now, in order.
  double t1, t2;
  const std::uint64_t bits1 = little_endian(wall_time_1), bits2 = little_endian(wall_time_2);
  std::memcpy(&t1, &bits1, 8);
  std::memcpy(&t2, &bits2, 8);
  CHECK(t1 > now_seconds() - 600.0);
  CHECK(t1 <= t2);
  CHECK(t2 <= now_seconds());
}

TEST_CASE("tensorboard: events read back with their tags, steps and float values") {
  TempDir dir;
  const std::string log_dir = dir.file("runs/a/tb");  // created with its parents
  std::string path;
  {
    train::SummaryWriter writer(log_dir);
    path = writer.path();
    for (const Point& p : kInteropPoints) writer.add_scalar(p.tag, p.value, p.step);
    for (std::int64_t step = 1; step <= 200; ++step) writer.add_scalar("curve", 1.0 / static_cast<double>(step), step);
  }
  CHECK(fs::path(path).parent_path() == fs::path(log_dir));
  const std::vector<Event> events = read_events(path);
  REQUIRE(events.size() == 1 + kInteropPoints.size() + 200);
  for (std::size_t i = 0; i < kInteropPoints.size(); ++i) {
    const Point& p = kInteropPoints[i];
    const Event& e = events[1 + i];
    CAPTURE(p.tag);
    CAPTURE(p.step);
    CHECK(e.file_version.empty());
    CHECK(e.step == p.step);
    REQUIRE(e.values.size() == 1);
    CHECK(e.values[0].tag == p.tag);
    const float expected = static_cast<float>(p.value);
    CHECK(std::memcmp(&e.values[0].value, &expected, 4) == 0);  // bit for bit: -0.0 and the subnormal too
    CHECK(e.wall_time >= events[i].wall_time);
  }
  for (std::int64_t step = 1; step <= 200; ++step) {
    const Event& e = events[kInteropPoints.size() + static_cast<std::size_t>(step)];
    CHECK(e.step == step);
    CHECK(e.values.at(0).tag == "curve");
    CHECK(e.values.at(0).value == static_cast<float>(1.0 / static_cast<double>(step)));
  }
}

TEST_CASE("tensorboard: add_scalar is buffered until flush, the destructor flushes, big buffers go out alone") {
  TempDir dir;
  std::string path;
  {
    train::SummaryWriter writer(dir.str());
    path = writer.path();
    const auto size = [&] { return fs::file_size(path); };
    const std::uintmax_t header = size();  // the file version record is written at once
    CHECK(header == 12 + 24 + 4);
    writer.add_scalar("a", 1.0, 1);
    writer.add_scalar("a", 2.0, 2);
    CHECK(size() == header);
    writer.flush();
    const std::uintmax_t two = size();
    CHECK(two > header);
    CHECK(read_events(path).size() == 3);
    writer.flush();  // nothing buffered: nothing written
    CHECK(size() == two);
    writer.add_scalar("a", 3.0, 3);
    CHECK(size() == two);
    // 64 KiB of buffered records are written without a flush; the file holds whole records only.
    const std::string long_tag(1000, 't');
    int added = 0;
    while (size() == two && added < 1000) {
      writer.add_scalar(long_tag, 0.25, 4 + added);
      ++added;
    }
    CHECK(added > 50);
    CHECK(added < 80);  // about 64 KiB / 1030 bytes per record
    CHECK(read_events(path).size() == 3 + 1 + static_cast<std::size_t>(added));
    writer.add_scalar("a", 5.0, 5);
  }
  const std::vector<Event> events = read_events(path);
  REQUIRE(!events.empty());
  CHECK(events.back().step == 5);
  CHECK(events.back().values.at(0).value == 5.0f);
}

TEST_CASE("tensorboard: file names as TensorBoard finds them, and two writers in one directory get two files") {
  TempDir dir;
  const double before = now_seconds();
  train::SummaryWriter first(dir.str());
  train::SummaryWriter second(dir.str());
  train::SummaryWriter third(dir.str());
  CHECK(first.path() != second.path());
  CHECK(second.path() != third.path());
  CHECK(first.path() != third.path());
  CHECK(dir.count_files() == 3);
  // events.out.tfevents.<unix seconds>.<hostname>[.<pid>.<n>]
  const std::string name = fs::path(first.path()).filename().string();
  const std::string prefix = "events.out.tfevents.";
  REQUIRE(name.rfind(prefix, 0) == 0);
  const std::size_t dot = name.find('.', prefix.size());
  REQUIRE(dot != std::string::npos);
  const double seconds = std::stod(name.substr(prefix.size(), dot - prefix.size()));
  CHECK(seconds >= std::floor(before));
  CHECK(seconds <= now_seconds());
  char host[256] = {};
  REQUIRE(::gethostname(host, sizeof host - 1) == 0);
  CHECK(name.substr(dot + 1, std::strlen(host)) == host);
  for (const train::SummaryWriter* w : {&first, &second, &third}) {
    const std::string n = fs::path(w->path()).filename().string();
    CHECK(n.find(".tfevents.") != std::string::npos);
    CHECK(read_events(w->path()).size() == 1);
  }
  first.add_scalar("x", 1.0, 1);
  second.add_scalar("x", 2.0, 1);
  first.flush();
  second.flush();
  CHECK(read_events(first.path()).at(1).values.at(0).value == 1.0f);
  CHECK(read_events(second.path()).at(1).values.at(0).value == 2.0f);
}

TEST_CASE("tensorboard: errors name the directory or the file") {
  TempDir dir;
  const std::string blocker = dir.file("not_a_dir");
  testing::write_text(blocker, "x");
  const std::string no_dir = "SummaryWriter: cannot create the directory " + blocker + "/tb: ";
  CHECK_THROWS_WITH_AS(train::SummaryWriter(blocker + "/tb"), doctest::Contains(no_dir.c_str()), IoError);
  CHECK_THROWS_WITH_AS(train::SummaryWriter(""), "SummaryWriter: log_dir is empty", ValueError);
  train::SummaryWriter writer(dir.file("tb"));
  CHECK_THROWS_WITH_AS(writer.add_scalar("", 1.0, 7), "SummaryWriter::add_scalar: empty tag at step 7", ValueError);
  CHECK(read_events(writer.path()).size() == 1);
}

TEST_CASE("tensorboard: a write that fails halfway is cut off the file and written whole by the next flush") {
  TempDir dir;
  train::SummaryWriter writer(dir.str());
  const std::string path = writer.path();
  const std::uintmax_t header = fs::file_size(path);
  writer.add_scalar("a", 1.0, 1);
  writer.add_scalar("a", 2.0, 2);
  {
    // A file size limit 10 bytes past the end: the write stops inside the first record (EFBIG; SIGXFSZ,
    // which would end the process, ignored), as a full disk would stop it.
    struct Restore {
      rlimit old{};
      void (*old_handler)(int) = SIG_DFL;
      ~Restore() {
        ::setrlimit(RLIMIT_FSIZE, &old);
        std::signal(SIGXFSZ, old_handler);
      }
    } restore;
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &restore.old) == 0);
    restore.old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limited = restore.old;
    limited.rlim_cur = static_cast<rlim_t>(header + 10);
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &limited) == 0);
    const std::string cannot_write = "SummaryWriter: cannot write " + path + ": ";
    CHECK_THROWS_WITH_AS(writer.flush(), doctest::Contains(cannot_write.c_str()), IoError);
    CHECK(fs::file_size(path) == header);  // the 10 bytes that went out are cut off again
    CHECK(read_events(path).size() == 1);
  }
  writer.add_scalar("a", 3.0, 3);
  writer.flush();
  const std::vector<Event> events = read_events(path);
  REQUIRE(events.size() == 4);
  for (std::int64_t step = 1; step <= 3; ++step) {
    CHECK(events[static_cast<std::size_t>(step)].step == step);
    CHECK(events[static_cast<std::size_t>(step)].values.at(0).value == static_cast<float>(step));
  }
}

TEST_CASE("tensorboard: write the event file for the protobuf check") {
  // The CTest fixture sets the directory (tests/tensorboard_check.py reads it); run alone, the file goes to a
  // temp directory and is read back here.
  TempDir dir;
  const char* env = std::getenv("TAPEGRAD_TENSORBOARD_OUT");
  const fs::path out = env != nullptr ? fs::path(env) : dir.path;
  // Earlier runs' files would be read too: the script expects exactly one.
  if (fs::exists(out))
    for (const auto& entry : fs::directory_iterator(out))
      if (entry.path().filename().string().find("tfevents") != std::string::npos) fs::remove(entry.path());
  std::string path;
  {
    train::SummaryWriter writer(out.string());
    path = writer.path();
    writer.add_session_start(kSessionStartStep);
    for (const Point& p : kInteropPoints) writer.add_scalar(p.tag, p.value, p.step);
  }
  const std::vector<Event> events = read_events(path);
  REQUIRE(events.size() == 2 + kInteropPoints.size());
  CHECK(events[1].session_status == 1);
  CHECK(events[1].step == kSessionStartStep);
  CHECK(events[1].values.empty());
  CHECK(events.back().values.at(0).tag == kInteropPoints.back().tag);
  CHECK(file_names(out) == std::vector<std::string>{fs::path(path).filename().string()});
}

TEST_CASE("tensorboard: the Trainer writes every number of its metrics lines as train/ and eval/ scalars") {
  TempDir dir;
  train::TrainerOptions o = testing::trainer::quiet_options(dir.file("run"), 8);
  o.tensorboard_dir = dir.file("tb");
  testing::trainer::Run run(7, o);
  const train::TrainResult result = run.trainer.fit(run.step_fn(), [](std::int64_t step) {
    return std::map<std::string, double>{{"val_loss", 1.0 / static_cast<double>(step)}};
  });
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir.file("tb"))) files.push_back(entry.path().string());
  REQUIRE(files.size() == 1);
  const std::vector<Event> events = read_events(files[0]);
  std::map<std::string, std::vector<std::pair<std::int64_t, float>>> series;
  for (std::size_t i = 1; i < events.size(); ++i)
    for (const auto& v : events[i].values) series[v.tag].emplace_back(events[i].step, v.value);
  // log_every 3 and the last step: lines at steps 3, 6 and 8; evaluations every 4 steps and at the end.
  const std::vector<std::int64_t> logged{3, 6, 8}, evaluated{4, 8};
  for (const char* key : {"train/loss", "train/step_loss", "train/lr", "train/grad_norm", "train/elapsed_s"}) {
    CAPTURE(key);
    REQUIRE(series[key].size() == logged.size());
    for (std::size_t i = 0; i < logged.size(); ++i) CHECK(series[key][i].first == logged[i]);
  }
  CHECK(series.count("train/step") == 0);
  REQUIRE(series["eval/val_loss"].size() == evaluated.size());
  for (std::size_t i = 0; i < evaluated.size(); ++i) {
    CHECK(series["eval/val_loss"][i].first == evaluated[i]);
    CHECK(series["eval/val_loss"][i].second == static_cast<float>(1.0 / static_cast<double>(evaluated[i])));
  }
  CHECK(series["train/step_loss"].back().second == static_cast<float>(result.final_loss));
}

TEST_CASE("tensorboard: every fit starts its file with a session start one step past where it begins") {
  // A run of 5 steps, then the same run resumed to 8: the resumed fit's file starts with a session start at
  // step 6, one past its checkpoint, so TensorBoard would drop any point an interrupted first run had
  // logged past that checkpoint; the first fit's file starts at step 1.
  TempDir dir;
  train::TrainerOptions first = testing::trainer::quiet_options(dir.file("run"), 5);
  first.tensorboard_dir = dir.file("tb");
  first.log_every = 1;
  first.checkpoint_every = 4;
  {
    testing::trainer::Run run(7, first);
    run.trainer.fit(run.step_fn());
  }
  train::TrainerOptions resumed = testing::trainer::quiet_options(dir.file("run"), 8);
  resumed.tensorboard_dir = dir.file("tb");
  resumed.resume = true;
  {
    testing::trainer::Run run(7, resumed);
    run.trainer.fit(run.step_fn());
  }
  std::vector<std::string> files = file_names(dir.file("tb"));
  REQUIRE(files.size() == 2);
  std::vector<std::vector<Event>> by_file;
  for (const std::string& name : files) by_file.push_back(read_events((fs::path(dir.file("tb")) / name).string()));
  // Which file is which: the one whose start is at step 1 is the first run's.
  std::sort(by_file.begin(), by_file.end(), [](const auto& a, const auto& b) { return a.at(1).step < b.at(1).step; });
  for (const auto& events : by_file) {
    REQUIRE(events.size() >= 2);
    CHECK(events[1].session_status == 1);
    CHECK(events[1].values.empty());
    for (std::size_t i = 2; i < events.size(); ++i) CHECK(events[i].session_status == 0);
  }
  CHECK(by_file[0][1].step == 1);
  CHECK(by_file[1][1].step == 6);  // the first fit ended at step 5 and checkpointed it
  // Every point of the second file is past its start.
  for (std::size_t i = 2; i < by_file[1].size(); ++i) CHECK(by_file[1][i].step >= 6);
}
