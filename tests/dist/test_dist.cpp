// tapegrad::dist under MPI: collectives on every dtype, DistributedDataParallel against one process
// on the global batch (every step, every parameter), bucketed against unbucketed reductions,
// no_sync accumulation, unused parameters. ctest runs this program twice: alone (a group of one,
// without MPI) and under `mpirun -np 2`. Every rank runs every case; each case's collectives are
// the same on every rank.

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tapegrad/dist/dist.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tapegrad/train/train.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::message_of;

namespace {

dist::ProcessGroup world() { return dist::init(); }

// y = fc2(tanh(norm(fc1(x)))): a LayerNorm between two Linears, so that buckets hold several dtypes'
// worth of small and large tensors in a realistic order.
class MlpImpl : public nn::Module {
 public:
  MlpImpl()
      : fc1(register_module("fc1", nn::Linear(6, 32))),
        norm(register_module("norm", nn::LayerNorm(32))),
        fc2(register_module("fc2", nn::Linear(32, 3))) {}
  Tensor forward(const Tensor& x) { return fc2(norm(fc1(x)).tanh()); }
  nn::Linear fc1;
  nn::LayerNorm norm;
  nn::Linear fc2;
};
TAPEGRAD_MODULE(Mlp);

// A model whose second layer only some steps use.
class BranchImpl : public nn::Module {
 public:
  BranchImpl() : fc1(register_module("fc1", nn::Linear(6, 3))), fc2(register_module("fc2", nn::Linear(3, 3))) {}
  Tensor forward(const Tensor& x, bool use_fc2) { return use_fc2 ? fc2(fc1(x)) : fc1(x); }
  nn::Linear fc1;
  nn::Linear fc2;
};
TAPEGRAD_MODULE(Branch);

// The global batch of step `step`: the same on every rank.
struct GlobalBatch {
  Tensor x;  // (N, 6)
  Tensor y;  // (N) int64
};
GlobalBatch global_batch(std::int64_t step, std::int64_t n) {
  Generator gen(1000 + static_cast<std::uint64_t>(step));
  GlobalBatch b;
  b.x = randn({n, 6}, gen);
  b.y = randint(0, 3, {n}, gen);
  return b;
}

// This rank's contiguous share of a global batch.
GlobalBatch shard(const GlobalBatch& b, const dist::ProcessGroup& group) {
  const std::int64_t share = b.x.size(0) / group.size();
  return {b.x.narrow(0, group.rank() * share, share), b.y.narrow(0, group.rank() * share, share)};
}

double max_abs_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  REQUIRE(x.size() == y.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

// Whether every rank holds bitwise the same values of t.
bool same_on_every_rank(const dist::ProcessGroup& group, const Tensor& t) {
  const Tensor all = group.all_gather(t.detach().contiguous());
  const std::vector<float> values = all.to_vector<float>();
  const std::size_t n = static_cast<std::size_t>(t.numel());
  for (int r = 1; r < group.size(); ++r)
    if (std::memcmp(values.data(), values.data() + r * n, n * sizeof(float)) != 0) return false;
  return true;
}

// Trainer options that print nothing and train over the group's replicas.
train::TrainerOptions replicated_options(const dist::ProcessGroup& group, std::int64_t max_steps) {
  train::TrainerOptions options;
  options.max_steps = max_steps;
  options.progress = train::Progress::Off;
  options.out = nullptr;
  options.replicas = dist::replicas(group);
  return options;
}

}  // namespace

TEST_CASE("dist: the group of the job") {
  const dist::ProcessGroup group = world();
  const char* launched_size = std::getenv("OMPI_COMM_WORLD_SIZE");
  CHECK(group.size() == (launched_size ? std::atoi(launched_size) : 1));
  CHECK(group.uses_mpi() == dist::launched_by_mpi());
  CHECK(group.rank() >= 0);
  CHECK(group.rank() < group.size());
  CHECK(group.local_rank() >= 0);
  CHECK(group.local_rank() < group.local_size());
  CHECK(group.local_size() <= group.size());
  // The node split agrees with the launcher's placement, on one machine and across a hostfile's
  // nodes (dist.hostfile_two_nodes: one process on each of two nodes, so a node of one).
  if (const char* local_size = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) {
    CHECK(group.local_size() == std::atoi(local_size));
    CHECK(group.local_rank() == std::atoi(std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")));
  }
  if (const char* nodes = std::getenv("TAPEGRAD_TEST_NODES"))
    CHECK(group.local_size() * std::atoi(nodes) == group.size());
  CHECK(num_threads() >= 1);
  group.barrier();
}

TEST_CASE("dist: collectives on every dtype") {
  const dist::ProcessGroup group = world();
  const int n = group.size(), r = group.rank();

  Tensor f = full({2, 3}, r + 1.0);
  group.all_reduce(f);
  CHECK(f.to_vector<double>() == std::vector<double>(6, n * (n + 1) / 2.0));

  Tensor mean = full({5}, 2.0 * r, kFloat64);
  group.all_reduce(mean, dist::ReduceOp::Mean);
  CHECK(mean.to_vector<double>() == std::vector<double>(5, n - 1.0));

  Tensor high = from_vector(std::vector<std::int64_t>{r, -r}, Shape{2});
  Tensor low = high.clone();
  group.all_reduce(high, dist::ReduceOp::Max);
  group.all_reduce(low, dist::ReduceOp::Min);
  CHECK(high.to_vector<std::int64_t>() == std::vector<std::int64_t>{n - 1, 0});
  CHECK(low.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, -(n - 1)});

  Tensor sum = full({3}, 7.0, kInt64);
  group.all_reduce(sum);
  CHECK(sum.to_vector<std::int64_t>() == std::vector<std::int64_t>(3, 7 * n));

  // bool: sum and max are a logical or, min a logical and.
  Tensor any = from_vector(std::vector<bool>{r == 0, false}, Shape{2});
  Tensor all = from_vector(std::vector<bool>{r == 0, true}, Shape{2});
  group.all_reduce(any, dist::ReduceOp::Sum);
  group.all_reduce(all, dist::ReduceOp::Min);
  CHECK(any.to_vector<double>() == std::vector<double>{1, 0});
  CHECK(all.to_vector<double>() == std::vector<double>{n == 1 ? 1.0 : 0.0, 1});

  CHECK(group.all_reduce(r + 0.5, dist::ReduceOp::Sum) == doctest::Approx(n * n / 2.0));
  CHECK(group.all_reduce(static_cast<double>(r), dist::ReduceOp::Max) == n - 1);

  // broadcast from the last rank, then all_gather of a per-rank tensor.
  Tensor b = full({4}, static_cast<double>(r), kFloat64);
  group.broadcast(b, n - 1);
  CHECK(b.to_vector<double>() == std::vector<double>(4, n - 1.0));
  Tensor mine = from_vector(std::vector<float>{static_cast<float>(r), 10.0f * r}, Shape{1, 2});
  Tensor gathered = group.all_gather(mine);
  CHECK(gathered.shape() == Shape{n, 1, 2});
  for (int k = 0; k < n; ++k) {
    CHECK(gathered.at({k, 0, 0}) == k);
    CHECK(gathered.at({k, 0, 1}) == 10.0 * k);
  }

  // Asynchronous: started, then waited; the version counter sees the write.
  Tensor a = full({1000}, 1.0);
  dist::Work work = group.all_reduce_async(a, dist::ReduceOp::Sum);
  work.wait();
  CHECK(work.is_completed());
  CHECK(a.at({999}) == n);

  // Mistakes are caught before any rank communicates.
  CHECK_THROWS_AS(group.all_reduce(sum, dist::ReduceOp::Mean), TypeError);
  CHECK(message_of([&] { group.all_reduce(sum, dist::ReduceOp::Mean); })
            .find("all_reduce: ReduceOp::Mean needs a "
                  "floating-point tensor, got int64") != std::string::npos);
  CHECK_THROWS_WITH_AS(group.all_reduce(zeros({3, 4}).transpose(0, 1)),
                       "all_reduce: the tensor must be contiguous (it is written in place), got shape (4,3) with "
                       "strides not row-major; pass t.contiguous() and copy back",
                       ValueError);
  const std::string bad_root =
      "broadcast: root " + std::to_string(n) + " is not a rank of a group of " + std::to_string(n);
  CHECK_THROWS_WITH_AS(group.broadcast(f, n), bad_root.c_str(), ValueError);
  CHECK_THROWS_WITH_AS(group.all_reduce(zeros({2}, kBFloat16)),
                       "all_reduce: MPI has no bfloat16 arithmetic; reduce a float32 copy (t.to(kFloat32))", TypeError);
  CHECK_THROWS_WITH_AS(group.set_timeout(std::chrono::milliseconds(0)),
                       "ProcessGroup::set_timeout: must be > 0 ms, got 0", ValueError);
  group.barrier();
}

TEST_CASE("dist: DistributedDataParallel equals one process on the global batch, every step") {
  const dist::ProcessGroup group = world();
  const std::int64_t global = 8;

  manual_seed(3);
  Mlp reference;
  // Every rank but 0 starts from other weights: the wrapper must broadcast rank 0's.
  manual_seed(group.rank() == 0 ? 3 : 77);
  Mlp replica;
  dist::DistributedDataParallelOptions options;
  options.first_bucket_cap_mb = 0.0005;  // about 500 bytes: several buckets
  options.bucket_cap_mb = 0.0002;        // about 200 bytes
  dist::DistributedDataParallel ddp(replica, group, options);
  CHECK(ddp.reducer().buckets().size() > 2);
  CHECK(ddp.reducer().buckets().front().front() == "fc2.bias");  // reverse registration order

  optim::Adam ref_opt(reference->parameters(), optim::AdamOptions(0.01));
  optim::Adam opt(replica->parameters(), optim::AdamOptions(0.01));
  const auto ref_params = reference->named_parameters();
  const auto params = replica->named_parameters();
  for (std::size_t i = 0; i < params.size(); ++i)
    CHECK(max_abs_difference(params[i].second, ref_params[i].second) == 0);

  for (std::int64_t step = 0; step < 6; ++step) {
    const GlobalBatch batch = global_batch(step, global);
    ref_opt.zero_grad();
    nn::cross_entropy(reference(batch.x), batch.y).backward();
    ref_opt.step();

    const GlobalBatch mine = shard(batch, group);
    opt.zero_grad();
    nn::cross_entropy(ddp(mine.x), mine.y).backward();
    opt.step();

    for (std::size_t i = 0; i < params.size(); ++i) {
      INFO("step " << step << ", " << params[i].first);
      // The mean of the ranks' batch means is the global batch mean, summed in another order.
      CHECK(max_abs_difference(params[i].second, ref_params[i].second) < 2e-6);
      CHECK(same_on_every_rank(group, params[i].second));
    }
  }
  const dist::GradientReducer::Timing timing = ddp.reducer().last_timing();
  CHECK(timing.bytes == (group.size() > 1 ? replica->num_parameters() * 4 : 0));  // one process reduces nothing
  if (group.size() > 1) CHECK(timing.overlapped_s + timing.waited_s > 0);         // reductions took time somewhere
}

TEST_CASE("dist: bucketed and unbucketed reductions give the same gradients") {
  const dist::ProcessGroup group = world();
  manual_seed(5);
  Mlp a;
  Mlp b;
  b->load_state_dict(a->state_dict());
  dist::DistributedDataParallelOptions many;
  many.first_bucket_cap_mb = 1e-6;  // one parameter per bucket
  many.bucket_cap_mb = 1e-6;
  dist::DistributedDataParallelOptions one;
  one.first_bucket_cap_mb = 100;
  dist::DistributedDataParallel bucketed(a, group, many);
  dist::DistributedDataParallel whole(b, group, one);
  CHECK(bucketed.reducer().buckets().size() == a->parameters().size());
  CHECK(whole.reducer().buckets().size() == 1);

  const GlobalBatch mine = shard(global_batch(0, 4 * group.size()), group);
  nn::cross_entropy(bucketed(mine.x), mine.y).backward();
  nn::cross_entropy(whole(mine.x), mine.y).backward();
  const auto pa = a->named_parameters(), pb = b->named_parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) {
    INFO(pa[i].first);
    CHECK(max_abs_difference(pa[i].second.grad(), pb[i].second.grad()) <= 1e-7);
    CHECK(same_on_every_rank(group, pa[i].second.grad()));
  }
}

TEST_CASE("dist: no_sync accumulates locally; the next backward reduces the sums") {
  const dist::ProcessGroup group = world();
  const std::int64_t global = 4 * group.size();
  manual_seed(9);
  Mlp reference;
  Mlp replica;
  replica->load_state_dict(reference->state_dict());
  dist::DistributedDataParallel ddp(replica, group);

  // Two micro-batches: the reference sums the global micro-batches' mean gradients.
  for (std::int64_t micro = 0; micro < 2; ++micro) {
    const GlobalBatch batch = global_batch(10 + micro, global);
    nn::cross_entropy(reference(batch.x), batch.y).backward();
  }
  const GlobalBatch first = shard(global_batch(10, global), group);
  {
    auto guard = ddp.no_sync();
    nn::cross_entropy(ddp(first.x), first.y).backward();
  }
  if (group.size() > 1) CHECK_FALSE(same_on_every_rank(group, replica->fc1->weight().grad()));  // not reduced
  const GlobalBatch second = shard(global_batch(11, global), group);
  nn::cross_entropy(ddp(second.x), second.y).backward();
  const auto p = replica->named_parameters(), q = reference->named_parameters();
  for (std::size_t i = 0; i < p.size(); ++i) {
    INFO(p[i].first);
    CHECK(max_abs_difference(p[i].second.grad(), q[i].second.grad()) < 1e-6);
    CHECK(same_on_every_rank(group, p[i].second.grad()));
  }
}

TEST_CASE("dist: a parameter left without gradient is named, or reduced as zero with find_unused_parameters") {
  const dist::ProcessGroup group = world();
  const GlobalBatch mine = shard(global_batch(20, 2 * group.size()), group);
  {
    manual_seed(1);
    Branch model;
    dist::DistributedDataParallel ddp(model, group);
    const std::string error = message_of([&] { nn::cross_entropy(ddp(mine.x, false), mine.y).backward(); });
    CHECK(error.find("2 parameter(s) got no gradient in a backward: fc2.bias, fc2.weight") != std::string::npos);
    CHECK(error.find("find_unused_parameters") != std::string::npos);
    // The reducer stays stopped: its replica may now differ from the others.
    CHECK_THROWS_AS(nn::cross_entropy(ddp(mine.x, true), mine.y).backward(), GraphError);
  }
  manual_seed(1);
  Branch model;
  dist::DistributedDataParallelOptions options;
  options.find_unused_parameters = true;
  dist::DistributedDataParallel ddp(model, group, options);
  // Rank 0 uses fc2, the others do not: fc2's gradient is rank 0's divided by the group size.
  const bool use_fc2 = group.rank() == 0;
  manual_seed(1);
  Branch alone;
  nn::cross_entropy(alone(mine.x, use_fc2), mine.y).backward();
  Tensor expected = alone->fc2->weight().grad().defined() ? alone->fc2->weight().grad().clone() : zeros({3, 3});
  group.broadcast(expected, 0);
  nn::cross_entropy(ddp(mine.x, use_fc2), mine.y).backward();
  CHECK(max_abs_difference(model->fc2->weight().grad(), expected / static_cast<double>(group.size())) < 1e-7);
  CHECK(same_on_every_rank(group, model->fc1->weight().grad()));
  CHECK(same_on_every_rank(group, model->fc2->weight().grad()));
}

TEST_CASE("dist: replicas that differ are refused, naming the rank") {
  const dist::ProcessGroup group = world();
  if (group.size() == 1) return;  // nothing to compare with
  nn::Linear model(group.rank() == 0 ? 4 : 5, 2);
  const std::string error = message_of([&] { dist::DistributedDataParallel<nn::Linear> ddp(model, group); });
  CHECK(error.find("DistributedDataParallel: rank " + std::to_string(group.rank()) +
                   "'s model differs from another rank's (parameters and buffers") != std::string::npos);
}

TEST_CASE("dist: the Trainer over DistributedDataParallel: global losses, one writer, resume on another world size") {
  const dist::ProcessGroup group = world();
  const std::int64_t global = 8;
  // One run directory for every rank, named after rank 0's process.
  Tensor id = full({1}, group.rank() == 0 ? static_cast<double>(::getpid()) : 0.0, kFloat64);
  group.broadcast(id, 0);
  const std::string run_dir =
      (std::filesystem::temp_directory_path() / ("tapegrad_dist_trainer_" + std::to_string(id.item<long long>())))
          .string();
  if (group.rank() == 0) std::filesystem::remove_all(run_dir);
  group.barrier();

  train::TrainerOptions options;
  options.max_steps = 6;
  options.log_every = 1;
  options.progress = train::Progress::Off;
  options.out = nullptr;

  // One process on the global batches.
  manual_seed(21);
  Mlp reference;
  optim::Adam ref_opt(reference->parameters(), optim::AdamOptions(0.01));
  const train::TrainResult expected = train::Trainer(reference, ref_opt, options).fit([&](std::int64_t step) {
    const GlobalBatch b = global_batch(step, global);
    return train::StepOutput{nn::cross_entropy(reference(b.x), b.y), global, 0};
  });

  // Every rank on its share, for 4 of the 6 steps, checkpointing into the shared directory.
  manual_seed(21);
  Mlp replica;
  dist::DistributedDataParallel ddp(replica, group);
  optim::Adam opt(replica->parameters(), optim::AdamOptions(0.01));
  train::TrainerOptions parallel = options;
  parallel.max_steps = 4;
  parallel.checkpoint_every = 2;
  parallel.run_dir = run_dir;
  parallel.replicas = dist::replicas(group);
  const train::TrainResult first = train::Trainer(replica, opt, parallel).fit([&](std::int64_t step) {
    const GlobalBatch b = shard(global_batch(step, global), group);
    return train::StepOutput{nn::cross_entropy(ddp(b.x), b.y), b.x.size(0), 0};
  });
  REQUIRE(first.losses.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) CHECK(first.losses[i] == doctest::Approx(expected.losses[i]).epsilon(1e-6));
  group.barrier();
  if (group.rank() == 0) {
    // Written once, by rank 0: four step lines, not four per rank.
    std::ifstream metrics(std::filesystem::path(run_dir) / "metrics.jsonl");
    int lines = 0;
    for (std::string line; std::getline(metrics, line);) ++lines;
    CHECK(lines == 4);

    // The checkpoint of the parallel run resumed by one process on the global batches.
    manual_seed(99);  // other initial weights: the checkpoint must replace them
    Mlp resumed;
    optim::Adam resumed_opt(resumed->parameters(), optim::AdamOptions(0.01));
    train::TrainerOptions alone = options;
    alone.run_dir = run_dir;
    const train::TrainResult second = train::Trainer(resumed, resumed_opt, alone).fit([&](std::int64_t step) {
      const GlobalBatch b = global_batch(step, global);
      return train::StepOutput{nn::cross_entropy(resumed(b.x), b.y), global, 0};
    });
    CHECK(second.resumed_from == 4);
    REQUIRE(second.losses.size() == 2);
    CHECK(second.losses[0] == doctest::Approx(expected.losses[4]).epsilon(1e-5));
    CHECK(second.losses[1] == doctest::Approx(expected.losses[5]).epsilon(1e-5));
    const auto p = resumed->named_parameters(), q = reference->named_parameters();
    for (std::size_t i = 0; i < p.size(); ++i) {
      INFO(p[i].first);
      CHECK(max_abs_difference(p[i].second, q[i].second) < 1e-5);
    }
    std::filesystem::remove_all(run_dir);
  }
  group.barrier();
}

TEST_CASE("dist: a NaN loss on one rank stops every rank at that step, naming the rank's own loss") {
  const dist::ProcessGroup group = world();
  manual_seed(4);
  Mlp model;
  dist::DistributedDataParallel ddp(model, group);
  optim::Adam opt(model->parameters(), optim::AdamOptions(0.01));
  train::Trainer trainer(model, opt, replicated_options(group, 5));
  const std::string error = message_of([&] {
    trainer.fit([&](std::int64_t step) {
      const GlobalBatch b = shard(global_batch(step, 2 * group.size()), group);
      Tensor loss = nn::cross_entropy(ddp(b.x), b.y);
      if (step == 2 && group.rank() == group.size() - 1) loss = loss * std::nan("");  // the last rank only
      return train::StepOutput{loss, b.x.size(0), 0};
    });
  });
  CHECK(trainer.step() == 2);  // every rank stopped before step 3's update
  if (group.size() > 1) {
    const std::string own = group.rank() == group.size() - 1 ? "nan" : "";
    CHECK(error.find("non-finite loss nan (the mean over " + std::to_string(group.size()) + " ranks; rank " +
                     std::to_string(group.rank()) + "'s own " + own) != std::string::npos);
  } else {
    CHECK(error.find("non-finite loss nan at step 3 (step_fn(2))") != std::string::npos);
  }
  group.barrier();
}

TEST_CASE("dist: metric names that differ between ranks are refused on every rank, naming it") {
  const dist::ProcessGroup group = world();
  manual_seed(5);
  Mlp model;
  dist::DistributedDataParallel ddp(model, group);
  optim::Adam opt(model->parameters(), optim::AdamOptions(0.01));
  train::TrainerOptions options = replicated_options(group, 2);
  options.eval_every = 1;
  train::Trainer trainer(model, opt, options);
  const std::string error = message_of([&] {
    trainer.fit(
        [&](std::int64_t step) {
          const GlobalBatch b = shard(global_batch(step, 2 * group.size()), group);
          return train::StepOutput{nn::cross_entropy(ddp(b.x), b.y), b.x.size(0), 0};
        },
        [&](std::int64_t) {
          return std::map<std::string, double>{{group.rank() == 0 ? "val_loss" : "val_lost", 1.0}};
        });
  });
  if (group.size() > 1) {
    CHECK(error.find("eval_fn returned other metric names on rank " + std::to_string(group.rank())) !=
          std::string::npos);
    CHECK(trainer.step() == 1);  // every rank stopped at the first evaluation
  } else {
    CHECK(error == "no error");  // one process has nothing to compare
  }
  group.barrier();
}

TEST_CASE("dist: ranks that resume at different steps are refused on every rank") {
  const dist::ProcessGroup group = world();
  // A run directory per rank (as when the ranks do not share a filesystem); the last rank's holds a
  // checkpoint at step 1, the others' nothing.
  const std::string run_dir =
      (std::filesystem::temp_directory_path() /
       ("tapegrad_dist_resume_" + std::to_string(::getpid()) + "_" + std::to_string(group.rank())))
          .string();
  std::filesystem::remove_all(run_dir);
  const bool last = group.rank() == group.size() - 1;
  // The loss of a step on this rank's rows, through forward (the model, or its DDP wrapper).
  auto step_fn = [&group](auto& forward) {
    return [&forward, &group](std::int64_t step) {
      const GlobalBatch b = shard(global_batch(step, 2 * group.size()), group);
      return train::StepOutput{nn::cross_entropy(forward(b.x), b.y), b.x.size(0), 0};
    };
  };
  train::TrainerOptions options;
  options.progress = train::Progress::Off;
  options.out = nullptr;
  options.run_dir = run_dir;
  if (last) {  // alone: no collective
    manual_seed(6);
    Mlp earlier;
    optim::Adam opt(earlier->parameters(), optim::AdamOptions(0.01));
    options.max_steps = 1;
    train::Trainer(earlier, opt, options).fit(step_fn(earlier));
  }
  manual_seed(6);
  Mlp model;
  dist::DistributedDataParallel ddp(model, group);
  optim::Adam opt(model->parameters(), optim::AdamOptions(0.01));
  options.max_steps = 3;
  options.replicas = dist::replicas(group);
  const std::string error = message_of([&] { train::Trainer(model, opt, options).fit(step_fn(ddp)); });
  if (group.size() > 1)
    CHECK(error.find("rank " + std::to_string(group.rank()) + " resumed at step " + (last ? "1" : "0") +
                     " but another rank at another step") != std::string::npos);
  else CHECK(error == "no error");  // one process resumes at its own step 1
  std::filesystem::remove_all(run_dir);
  group.barrier();
}

int main(int argc, char** argv) {
  dist::InitOptions options;
  options.timeout = std::chrono::seconds(60);
  const dist::ProcessGroup group = dist::init(options);
  doctest::Context context(argc, argv);
  const int failed = context.run();
  // Every rank's verdict: the job fails if any rank's checks failed.
  return group.all_reduce(static_cast<double>(failed != 0), dist::ReduceOp::Max) > 0 ? 1 : 0;
}
