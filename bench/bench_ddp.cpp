// W3 (the causal language-model step, docs/bench.md) data-parallel: the global batch of 16 split over
// the processes of `mpirun -np N`, gradients averaged by dist::DistributedDataParallel. Compare
//   mpirun -np 2 tapegrad_ddp_bench --threads 1     (2 processes of 1 thread)
//   tapegrad_ddp_bench --threads 2                  (1 process of 2 threads, no communication)
// Rank 0 prints the median step time and what the gradient all-reduce cost: the bytes reduced per
// step, the time backward spent with reductions in flight, the time waited for them after backward
// (exposed communication), and the time the same all-reduces take alone, without backward; the share
// hidden behind backward is 1 - waited / alone.
//
//   tapegrad_ddp_bench [--steps 30] [--warmup 3] [--threads N] [--bucket_mb 25] [--json]
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "bench/w3_model.h"
#include "tapegrad/dist/dist.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"

using namespace tapegrad;
using bench::Clock;
using bench::median;
using bench::ms_since;

namespace {

struct Args {
  int steps = 30;
  int warmup = 3;
  int threads = 0;
  double bucket_mb = 25.0;
  bool json = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw ValueError("tapegrad_ddp_bench: " + arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--steps") a.steps = std::stoi(value());
    else if (arg == "--warmup") a.warmup = std::stoi(value());
    else if (arg == "--threads") a.threads = std::stoi(value());
    else if (arg == "--bucket_mb") a.bucket_mb = std::stod(value());
    else if (arg == "--json") a.json = true;
    else throw ValueError("tapegrad_ddp_bench: unknown argument " + arg);
  }
  if (a.steps < 1 || a.warmup < 0 || a.threads < 0 || !(a.bucket_mb > 0))
    throw ValueError("tapegrad_ddp_bench: --steps >= 1, --warmup >= 0, --threads >= 0, --bucket_mb > 0");
  return a;
}

int run(const Args& args) {
  dist::InitOptions init;
  init.set_threads = args.threads == 0;
  const dist::ProcessGroup world = dist::init(init);
  if (args.threads > 0) set_num_threads(args.threads);
  using C = bench::LmConfig;
  if (C::kBatch % world.size() != 0)
    throw ValueError(
        message("tapegrad_ddp_bench: the global batch of 16 does not divide among ", world.size(), " processes"));

  nn::LanguageModel model = bench::w3_model();
  dist::DistributedDataParallelOptions options;
  options.bucket_cap_mb = args.bucket_mb;
  dist::DistributedDataParallel ddp(model, world, options);
  optim::AdamW adamw(model->parameters(), optim::AdamWOptions(3e-4));
  const std::int64_t rows = C::kBatch / world.size();
  const Tensor tokens =
      from_vector(bench::lm_tokens(), {C::kBatch, C::kLength + 1}).narrow(0, world.rank() * rows, rows);
  const Tensor inputs = tokens.slice(1, 0, C::kLength).contiguous();        // (B / N, T)
  const Tensor targets = tokens.slice(1, 1, C::kLength + 1).reshape({-1});  // (B / N T)

  std::vector<double> step_ms, overlapped_ms, waited_ms;
  double loss = 0.0;
  for (int i = 0; i < args.warmup + args.steps; ++i) {
    const auto start = Clock::now();
    adamw.zero_grad();
    const Tensor l = nn::cross_entropy(ddp(inputs).reshape({-1, C::kVocab}), targets);
    l.backward();
    adamw.step();
    loss = l.item();
    const double ms = ms_since(start);
    if (i < args.warmup) continue;
    step_ms.push_back(ms);
    const dist::GradientReducer::Timing t = ddp.reducer().last_timing();
    overlapped_ms.push_back(t.overlapped_s * 1000);
    waited_ms.push_back(t.waited_s * 1000);
  }
  const std::int64_t bytes = ddp.reducer().last_timing().bytes;

  // The same all-reduces without backward: one buffer per bucket, started together, waited for.
  std::vector<double> alone_ms;
  if (world.size() > 1) {
    std::vector<Tensor> buffers;
    for (const auto& bucket : ddp.reducer().buckets()) {
      std::int64_t n = 0;
      for (const auto& [name, p] : model->named_parameters())
        for (const std::string& in : bucket)
          if (in == name) n += p.numel();
      buffers.push_back(ones({n}));
    }
    for (int i = 0; i < args.warmup + args.steps; ++i) {
      world.barrier();
      const auto start = Clock::now();
      std::vector<dist::Work> works;
      for (const Tensor& b : buffers) works.push_back(world.all_reduce_async(b, dist::ReduceOp::Mean));
      for (dist::Work& w : works) w.wait();
      if (i >= args.warmup) alone_ms.push_back(ms_since(start));
    }
  }
  const double step = median(step_ms), waited = median(waited_ms), alone = alone_ms.empty() ? 0.0 : median(alone_ms);
  const double slowest = world.all_reduce(step, dist::ReduceOp::Max);
  loss = world.all_reduce(loss, dist::ReduceOp::Mean);  // the last step's loss over the global batch
  if (world.rank() != 0) return 0;
  const double hidden = alone > 0 ? std::max(0.0, 1.0 - waited / alone) : 0.0;
  if (args.json) {
    std::printf(
        "{\"workload\":\"w3_ddp\",\"processes\":%d,\"threads\":%d,\"median_ms\":%.3f,\"slowest_rank_median_ms\":%.3f,"
        "\"tokens_per_s\":%.1f,\"allreduce_bytes\":%lld,\"buckets\":%zu,\"overlapped_ms\":%.3f,\"waited_ms\":%.3f,"
        "\"allreduce_alone_ms\":%.3f,\"hidden_share\":%.3f,\"final_loss\":%.5f}\n",
        world.size(), num_threads(), step, slowest, C::kBatch * C::kLength / (step / 1000.0),
        static_cast<long long>(bytes), ddp.reducer().buckets().size(), median(overlapped_ms), waited, alone, hidden,
        loss);
  } else {
    std::printf("W3 data-parallel: %d process(es) x %d thread(s): %.1f ms/step (slowest rank %.1f), %.0f tokens/s\n",
                world.size(), num_threads(), step, slowest, C::kBatch * C::kLength / (step / 1000.0));
    std::printf(
        "  all-reduce per step: %.2f MB in %zu buckets; in flight during backward %.2f ms, waited after it %.2f "
        "ms, alone %.2f ms: %.0f%% hidden\n",
        bytes / 1e6, ddp.reducer().buckets().size(), median(overlapped_ms), waited, alone, 100 * hidden);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "tapegrad_ddp_bench: " << e.what() << "\n";
    return 1;
  }
}
