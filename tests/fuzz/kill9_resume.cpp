// Crash safety of a Trainer run: killed with SIGKILL at seeded random moments and restarted each time on the
// same run directory, it must end bit-identical to an uninterrupted run.
//
//   kill9_resume --trainee PATH --work-dir DIR [--kills 6] [--seed 1] [--steps 300] [--checkpoint-every 2]
//
// (a) runs the trainee (resume_trainee) to completion twice (DIR/a_warm_up, DIR/a) and takes the faster wall
// time as T; (b) starts it in DIR/b and kills it with SIGKILL after a delay, --kills times, each restart
// resuming the chain left by the killed ones, then lets it finish. The kill moments are seeded random points spread
// over T (so most land during training, some during start-up, a resume or a checkpoint write). Then the model and
// optimiser tensors of both final checkpoints must be equal bit for bit, the trainer state equal but for the wall time,
// and metrics.jsonl hold the same lines (wall-time fields aside). Exit status 1 if anything differs, a run fails, the
// checkpoint on disk goes back or vanishes after a kill, a kill leaves files behind (but the temporary file of an
// interrupted io::write_file_atomic, which is listed), or fewer than half of the kills landed while the trainee was
// running.

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/generator.h"
#include "tapegrad/autograd/tensor.h"
#include "tapegrad/io/safetensors.h"
#include "tapegrad/train/checkpoint.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace tapegrad;

// The test itself went wrong (a run failed, results differ): printed, exit status 1.
class TestFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Options {
  std::string trainee;
  std::string work_dir;
  std::int64_t kills = 6;
  std::uint64_t seed = 1;
  std::int64_t steps = 300;
  std::int64_t checkpoint_every = 2;
};

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) throw TestFailure(arg + " needs a value");
    const std::string value = argv[++i];
    auto number = [&]() -> std::int64_t {
      char* end = nullptr;
      const long long v = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v < 0) throw TestFailure(arg + " expects a non-negative integer");
      return v;
    };
    if (arg == "--trainee") o.trainee = value;
    else if (arg == "--work-dir") o.work_dir = value;
    else if (arg == "--kills") o.kills = number();
    else if (arg == "--seed") o.seed = static_cast<std::uint64_t>(number());
    else if (arg == "--steps") o.steps = number();
    else if (arg == "--checkpoint-every") o.checkpoint_every = number();
    else throw TestFailure("unknown argument " + arg);
  }
  if (o.trainee.empty() || o.work_dir.empty()) throw TestFailure("--trainee and --work-dir are required");
  return o;
}

// ---------------------------------------------------------------- running the trainee

// A started trainee: its process id and start time.
struct Child {
  pid_t pid = -1;
  Clock::time_point start;
};

// Starts the trainee on run_dir, its output appended to log.
Child start(const Options& o, const std::string& run_dir, const std::string& log) {
  const std::string steps = std::to_string(o.steps), every = std::to_string(o.checkpoint_every);
  std::vector<char*> argv = {const_cast<char*>(o.trainee.c_str()), const_cast<char*>(run_dir.c_str()),
                             const_cast<char*>(steps.c_str()), const_cast<char*>(every.c_str()), nullptr};
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw TestFailure("cannot open " + log + ": " + std::strerror(errno));
  Child child;
  child.start = Clock::now();
  child.pid = ::fork();
  if (child.pid < 0) throw TestFailure(std::string("fork: ") + std::strerror(errno));
  if (child.pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fd);
  return child;
}

// The last lines of a log, for a failure message.
std::string tail(const std::string& path, std::size_t max_chars = 3000) {
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > max_chars ? "..." + text.substr(text.size() - max_chars) : text;
}

// Waits for the child to exit; TestFailure unless it exited with status 0.
double wait_success(const Child& child, const std::string& what, const std::string& log) {
  int status = 0;
  while (::waitpid(child.pid, &status, 0) < 0)
    if (errno != EINTR) throw TestFailure(std::string("waitpid: ") + std::strerror(errno));
  const double seconds = std::chrono::duration<double>(Clock::now() - child.start).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw TestFailure(what + " failed (" +
                      (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                         : "signal " + std::to_string(WTERMSIG(status))) +
                      "); its log " + log + " ends:\n" + tail(log));
  return seconds;
}

// Lets the child run for delay, then kills it with SIGKILL. True when the kill landed while it ran; false
// when it had finished already (successfully, or TestFailure).
bool kill_after(const Child& child, double delay, const std::string& what, const std::string& log) {
  const Clock::time_point deadline =
      child.start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(delay));
  while (Clock::now() < deadline) {
    int status = 0;
    const pid_t done = ::waitpid(child.pid, &status, WNOHANG);
    if (done == child.pid) {
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw TestFailure(what + " failed before its kill; its log " + log + " ends:\n" + tail(log));
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  ::kill(child.pid, SIGKILL);
  int status = 0;
  while (::waitpid(child.pid, &status, 0) < 0)
    if (errno != EINTR) throw TestFailure(std::string("waitpid: ") + std::strerror(errno));
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) return true;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return false;  // finished just before the signal
  throw TestFailure(what + " failed before its kill; its log " + log + " ends:\n" + tail(log));
}

// ---------------------------------------------------------------- comparing the runs

std::string hex_prefix(const std::string& bytes) {
  std::ostringstream out;
  for (std::size_t i = 0; i < bytes.size() && i < 16; ++i)
    out << std::hex << (static_cast<unsigned>(bytes[i]) & 0xFF) << ' ';
  return out.str();
}

std::string raw_bytes(const Tensor& t) {
  const Tensor c = t.contiguous();
  const std::size_t n = static_cast<std::size_t>(c.numel()) * element_size(c.dtype());
  const void* p = dispatch_all(c.dtype(), [&](auto tag) -> const void* { return c.data_ptr<decltype(tag)>(); });
  return n == 0 ? std::string() : std::string(static_cast<const char*>(p), n);
}

// The tensors of two safetensors files, equal by name, order, dtype, shape and bytes; returns how many.
std::size_t compare_tensors(const std::string& a, const std::string& b) {
  const io::SafetensorsFile fa = io::load_safetensors(a), fb = io::load_safetensors(b);
  if (fa.tensors.size() != fb.tensors.size())
    throw TestFailure(a + " holds " + std::to_string(fa.tensors.size()) + " tensors, " + b + " " +
                      std::to_string(fb.tensors.size()));
  for (std::size_t i = 0; i < fa.tensors.size(); ++i) {
    const auto& [name_a, ta] = fa.tensors[i];
    const auto& [name_b, tb] = fb.tensors[i];
    if (name_a != name_b)
      throw TestFailure(a + ": tensor " + std::to_string(i) + " is " + name_a + " but " + name_b + " in " + b);
    if (ta.dtype() != tb.dtype() || !(ta.shape() == tb.shape()))
      throw TestFailure(name_a + ": " + ta.shape().str() + " " + dtype_name(ta.dtype()) + " vs " + tb.shape().str() +
                        " " + dtype_name(tb.dtype()));
    const std::string ba = raw_bytes(ta), bb = raw_bytes(tb);
    if (ba != bb) {
      std::size_t at = 0;
      while (ba[at] == bb[at]) ++at;
      throw TestFailure(a + " and " + b + ": tensor " + name_a + " differs from byte " + std::to_string(at) + ": " +
                        hex_prefix(ba.substr(at)) + "vs " + hex_prefix(bb.substr(at)));
    }
  }
  return fa.tensors.size();
}

void compare_trainer_state(const std::string& a, const std::string& b) {
  const train::CheckpointState sa = train::read_trainer_json(a), sb = train::read_trainer_json(b);
  auto same = [&](bool equal, const std::string& field) {
    if (!equal) throw TestFailure("trainer.json field " + field + " differs between " + a + " and " + b);
  };
  same(sa.step == sb.step, "step");
  same(sa.scheduler_step == sb.scheduler_step, "scheduler_step");
  same(sa.optimizer_steps == sb.optimizer_steps, "optimizer_steps");
  same(sa.generators == sb.generators, "generators");
  same(sa.lrs == sb.lrs, "lrs");
  same(sa.loss == sb.loss, "loss");
}

std::vector<json> metrics_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw TestFailure("cannot read " + path);
  std::vector<json> lines;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    try {
      json j = json::parse(line);
      for (const char* timing : {"elapsed_s", "examples_per_s", "tokens_per_s"}) j.erase(timing);
      lines.push_back(std::move(j));
    } catch (const json::exception& e) {
      throw TestFailure(path + ":" + std::to_string(n) + " is not JSON: " + line.substr(0, 200));
    }
  }
  return lines;
}

// metrics.jsonl of both runs: the same lines (step, loss, lr, grad_norm, evaluations), wall time aside.
// Returns the number of loss lines.
std::size_t compare_metrics(const std::string& a, const std::string& b) {
  const std::vector<json> la = metrics_lines(a), lb = metrics_lines(b);
  std::size_t losses = 0;
  for (std::size_t i = 0; i < std::max(la.size(), lb.size()); ++i) {
    if (i >= la.size() || i >= lb.size() || la[i] != lb[i])
      throw TestFailure("metrics.jsonl line " + std::to_string(i + 1) +
                        " differs: " + (i < la.size() ? la[i].dump() : "(none)") + " in " + a + ", " +
                        (i < lb.size() ? lb[i].dump() : "(none)") + " in " + b);
    if (la[i].contains("loss")) ++losses;
  }
  return losses;
}

// ---------------------------------------------------------------- the test

// True for the temporary file of io::write_file_atomic, "<path>.tmp.<pid>.<n>".
bool atomic_write_temp(const std::string& name) {
  const std::size_t at = name.rfind(".tmp.");
  if (at == std::string::npos) return false;
  const std::string rest = name.substr(at + 5);
  const std::size_t dot = rest.find('.');
  auto digits = [](const std::string& t) {
    return !t.empty() && t.find_first_not_of("0123456789") == std::string::npos;
  };
  return dot != std::string::npos && digits(rest.substr(0, dot)) && digits(rest.substr(dot + 1));
}

// The files and directories under dir, sorted, as one line; write_file_atomic's temporary files go to
// *temps instead (a kill during the write leaves one; nothing removes it, and it changes no result).
std::string entries(const std::string& dir, std::string* temps) {
  std::vector<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string name = fs::relative(e.path(), dir).string();
    if (atomic_write_temp(name)) *temps += " " + name;
    else names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : " ") + n;
  return out;
}

// The kill moments: sorted seeded random points in (2%, 92%) of the uninterrupted run's time T. Each
// restart resumes where the killed chain left off, so the i-th run is killed after the gap between
// points i-1 and i: the kills spread over the run, with some gaps short enough to hit start-up.
std::vector<double> kill_delays(std::int64_t kills, double run_seconds, std::uint64_t seed) {
  Generator gen(seed);
  std::vector<double> points(static_cast<std::size_t>(kills));
  for (double& p : points) p = gen.uniform(0.02, 0.92);
  std::sort(points.begin(), points.end());
  std::vector<double> delays;
  double previous = 0;
  for (const double p : points) {
    delays.push_back((p - previous) * run_seconds);
    previous = p;
  }
  return delays;
}

int run(const Options& o) {
  const fs::path work = fs::absolute(o.work_dir);
  fs::remove_all(work);
  fs::create_directories(work);
  const std::string dir_a = (work / "a").string(), dir_b = (work / "b").string();
  const std::string log_a = (work / "a.log").string(), log_b = (work / "b.log").string();

  // T is the faster of two uninterrupted runs: the first start of a freshly linked trainee can be several
  // times slower (cold caches), and kills spread over a T too long land after the resumed runs finish.
  const double t_warm_up =
      wait_success(start(o, (work / "a_warm_up").string(), log_a), "the first uninterrupted run", log_a);
  const double t_a = std::min(t_warm_up, wait_success(start(o, dir_a, log_a), "the uninterrupted run (a)", log_a));
  std::cout << "kill9_resume: uninterrupted run: " << o.steps << " steps, a checkpoint every " << o.checkpoint_every
            << ", " << t_a << " s (the faster of two runs)\n";

  const std::vector<double> delays = kill_delays(o.kills, t_a, o.seed);
  std::int64_t landed = 0, on_disk = -1;
  for (std::size_t i = 0; i < delays.size(); ++i) {
    const std::string what = "run (b) #" + std::to_string(i + 1);
    const bool mid_run = kill_after(start(o, dir_b, log_b), delays[i], what, log_b);
    landed += mid_run ? 1 : 0;
    // A kill at any moment leaves one complete checkpoint: the one on disk never goes back or vanishes.
    const std::int64_t step = train::checkpoint_step_on_disk(dir_b);
    std::cout << "  kill " << i + 1 << " after " << static_cast<int>(delays[i] * 1000)
              << " ms: " << (mid_run ? "landed mid-run" : "the run had finished") << "; checkpoint on disk: step "
              << step << "\n";
    if (step < on_disk)
      throw TestFailure("after kill " + std::to_string(i + 1) + " the checkpoint on disk is at step " +
                        std::to_string(step) + " (-1: none or unreadable), before it was at step " +
                        std::to_string(on_disk));
    on_disk = step;
  }
  const double t_last = wait_success(start(o, dir_b, log_b), "the final run (b)", log_b);
  std::cout << "  final run (b) finished in " << t_last << " s\n";

  // Nothing left behind by the kills (no checkpoint.tmp-*, no checkpoint.old) but temporary files of
  // interrupted atomic writes, which are listed.
  std::string temps_a, temps_b;
  const std::string files_a = entries(dir_a, &temps_a), files_b = entries(dir_b, &temps_b);
  if (files_a != files_b)
    throw TestFailure("the run directories hold different files: " + files_a + " in " + dir_a + ", " + files_b +
                      " in " + dir_b);
  if (!temps_b.empty())
    std::cout << "  note: interrupted atomic writes left temporary files in " << dir_b << ":" << temps_b << "\n";
  const fs::path ca = fs::path(dir_a) / "checkpoint", cb = fs::path(dir_b) / "checkpoint";
  const std::size_t model = compare_tensors((ca / "model.safetensors").string(), (cb / "model.safetensors").string());
  const std::size_t opt =
      compare_tensors((ca / "optimizer.safetensors").string(), (cb / "optimizer.safetensors").string());
  compare_trainer_state((ca / "trainer.json").string(), (cb / "trainer.json").string());
  const std::size_t losses =
      compare_metrics((fs::path(dir_a) / "metrics.jsonl").string(), (fs::path(dir_b) / "metrics.jsonl").string());
  std::cout << "kill9_resume: " << landed << " of " << o.kills << " kills landed mid-run (seed " << o.seed
            << "); identical: " << model << " model tensors, " << opt << " optimiser tensors, trainer state, " << losses
            << " loss lines of metrics.jsonl\n";
  if (o.steps > 0 && losses != static_cast<std::size_t>(o.steps))
    throw TestFailure("metrics.jsonl has " + std::to_string(losses) + " loss lines, expected " +
                      std::to_string(o.steps));
  // Kills that all came after the end would test nothing.
  if (2 * landed < o.kills)
    throw TestFailure("only " + std::to_string(landed) + " of " + std::to_string(o.kills) + " kills landed mid-run");
  fs::remove_all(work);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_options(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "kill9_resume: FAILED: " << e.what() << "\n";
    return 1;
  }
}
