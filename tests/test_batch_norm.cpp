// BatchNorm1d and BatchNorm2d (nn/batch_norm.h): the running statistics over several batches
// (momentum and the cumulative average), eval mode, track_running_stats false, the state dict,
// gradcheck of both orders, and the errors. F.batch_norm's values and gradients against PyTorch are
// in test_torch_reference.cpp.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;
using tapegrad::testing::names;

TEST_CASE("batch norm: running statistics as a cumulative average, the batch count, then eval, as torch's") {
  // torch.nn.BatchNorm1d(2, momentum=None) in float64 over two batches, then eval on [[1, 1]]:
  // running mean [4/3, 2] and variance [7/3, 9] after the first, [13/6, 1.25] and [13/6, 4.75] after
  // the second, num_batches_tracked 1 then 2, and eval gives [-0.7925920948, -0.1147077462].
  nn::BatchNorm1d bn{nn::BatchNormOptions(2).momentum(std::nullopt)};
  bn->to(kFloat64);
  bn(tensor({{1, 2}, {3, -1}, {0, 5}}, kFloat64));
  check_values(bn->running_mean(), {4.0 / 3.0, 2.0}, 1e-12);
  check_values(bn->running_var(), {7.0 / 3.0, 9.0}, 1e-12);
  CHECK(bn->num_batches_tracked().item() == 1.0);
  bn(tensor({{2, 0}, {4, 1}}, kFloat64));
  check_values(bn->running_mean(), {13.0 / 6.0, 1.25}, 1e-12);
  check_values(bn->running_var(), {13.0 / 6.0, 4.75}, 1e-12);
  CHECK(bn->num_batches_tracked().dtype() == kInt64);
  CHECK(bn->num_batches_tracked().item() == 2.0);
  bn->eval();
  check_values(bn(tensor({{1, 1}}, kFloat64)), {-0.7925920948, -0.1147077462}, 1e-9);
  CHECK(bn->num_batches_tracked().item() == 2.0);  // eval leaves the statistics alone
  CHECK(names(bn->named_parameters()) == std::vector<std::string>{"weight", "bias"});
  CHECK(names(bn->named_buffers()) == std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"});
  bn->reset_running_stats();
  check_values(bn->running_var(), {1, 1}, 1e-15);
  CHECK(bn->num_batches_tracked().item() == 0.0);
}

TEST_CASE("batch norm: without running statistics eval mode uses the batch's, and a state dict round-trips") {
  // torch: BatchNorm2d(3, track_running_stats=False).eval() on arange(12).reshape(1, 3, 2, 2) normalises
  // each channel's [0, 1, 2, 3] + 4c to [-1.3416, -0.4472, 0.4472, 1.3416].
  nn::BatchNorm2d bn{nn::BatchNormOptions(3).track_running_stats(false)};
  bn->eval();
  const Tensor y = bn(arange(12).to(kFloat32).reshape({1, 3, 2, 2}));
  check_values(y.select(1, 2), {-1.3416357040, -0.4472121000, 0.4472115040, 1.3416351080}, 1e-5);
  CHECK(bn->named_buffers().empty());
  // Training statistics saved and loaded into another module give the same eval output.
  nn::BatchNorm2d a(4), b(4);
  Generator gen(2);
  a(randn({5, 4, 3, 3}, gen) * 3.0 + 1.0);
  a->eval();
  b->load_state_dict(a->state_dict());
  b->eval();
  const Tensor x = randn({2, 4, 3, 3}, gen);
  CHECK(a(x).to_vector<float>() == b(x).to_vector<float>());
}

TEST_CASE("batch norm: gradcheck in training and eval, first and second order") {
  Generator gen(4);
  const Tensor x = randn({4, 3, 2, 2}, gen, kFloat64), w = randn({3}, gen, kFloat64), b = randn({3}, gen, kFloat64);
  const Tensor rm = randn({3}, gen, kFloat64), rv = rand({3}, gen, kFloat64) + 0.5;
  check_gradients(
      [](const TensorList& in) { return nn::functional::batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true); },
      {x, w, b});
  check_gradients(
      [rm, rv](const TensorList& in) { return nn::functional::batch_norm(in[0], rm, rv, in[1], in[2], false); },
      {x, w, b});
}

TEST_CASE("batch norm: errors name the module and the shapes") {
  nn::BatchNorm2d bn(3);
  CHECK_THROWS_WITH_AS(bn(zeros({2, 4, 5, 5})),
                       "BatchNorm2d: expected an input of shape (N, C, H, W) with C = 3, got (2,4,5,5)", ShapeError);
  nn::BatchNorm1d bn1(3);
  CHECK_THROWS_WITH_AS(bn1(zeros({2, 3, 4, 5})),
                       "BatchNorm1d: expected an input of shape (N, C) or (N, C, L) with C = 3, got (2,3,4,5)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(bn1(zeros({1, 3})),
                       "batch_norm: training needs more than one value per channel, got an input of shape (1,3)",
                       ValueError);
  CHECK(bn1->num_batches_tracked().item() == 0.0);  // a refused batch is not counted
  CHECK_THROWS_WITH_AS(nn::functional::batch_norm(zeros({2, 3}), zeros({2}), ones({2})),
                       "batch_norm: expected running_mean of shape (3) for an input of shape (2,3), got (2)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(nn::functional::batch_norm(zeros({2, 3}), Tensor(), Tensor()),
                       "batch_norm: evaluation (training false) needs running_mean and running_var", ValueError);
  CHECK_THROWS_WITH_AS(nn::BatchNorm1d(nn::BatchNormOptions(3).momentum(1.5)),
                       "BatchNorm1d: momentum must be in [0, 1], got 1.5", ValueError);
  CHECK_THROWS_WITH_AS(nn::functional::batch_norm(zeros({3}), zeros({3}), ones({3})),
                       "batch_norm: expected an input of shape (N, C, ...), got (3)", ShapeError);
  CHECK_THROWS_WITH_AS(nn::functional::batch_norm(zeros({2, 3}), zeros({3}), Tensor()),
                       "batch_norm: give both running_mean and running_var, or neither", ValueError);
  CHECK_THROWS_WITH_AS(nn::BatchNorm2d(0), "BatchNorm2d: num_features must be positive, got 0", ValueError);
}

TEST_CASE("batch norm: under autocast a bfloat16 input (a convolution's output) is normalised in float32") {
  Generator gen(6);
  nn::BatchNorm2d bn(3);
  const Tensor x = randn({4, 3, 2, 2}, gen);
  const Tensor reference = bn(x);
  nn::BatchNorm2d bn16(3);
  AutocastGuard autocast(kBFloat16);
  const Tensor y = bn16(x.to(kBFloat16));
  CHECK(y.dtype() == kFloat32);  // the statistics follow the float32 policy of mean and var
  CHECK(max(abs(y - reference)).item() < 0.05);
  CHECK(max(abs(bn16->running_mean() - bn->running_mean())).item() < 0.01);
}

TEST_CASE("group norm: the module's parameters, a worked case, train and eval alike, gradcheck and errors") {
  nn::GroupNorm norm(nn::GroupNormOptions(2, 4));
  CHECK(names(norm->named_parameters()) == std::vector<std::string>{"weight", "bias"});
  CHECK(norm->buffers().empty());
  // Sample 0: group 0 holds channels 0 and 1, [0, 1, 2, 3] (mean 1.5, variance 1.25); group 1 holds
  // [4, 6, 8, 10] (mean 7, variance 5): both normalise to [-3, -1, 1, 3] / sqrt(5) (eps aside).
  const Tensor x = tensor({0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0}, kFloat64).reshape({1, 4, 2});
  norm->to(kFloat64);
  const double s = std::sqrt(5.0);
  const Tensor y = norm(x);
  check_values(y, {-3 / s, -1 / s, 1 / s, 3 / s, -3 / s, -1 / s, 1 / s, 3 / s}, 1e-5);
  norm->eval();
  tapegrad::testing::check_close(norm(x), y, 0.0);  // no running statistics: eval is training
  Generator gen(4);
  check_gradients([](const TensorList& in) { return nn::functional::group_norm(in[0], 3, in[1], in[2], 1e-3); },
                  {randn({2, 6, 3}, gen, kFloat64), randn({6}, gen, kFloat64), randn({6}, gen, kFloat64)});
  nn::GroupNorm plain(nn::GroupNormOptions(3, 3).affine(false));
  CHECK(plain->parameters().empty());
  CHECK_THROWS_WITH_AS(nn::GroupNorm(nn::GroupNormOptions(3, 4)),
                       "GroupNorm: num_groups 3 must be at least 1 and divide num_channels 4", ValueError);
  CHECK_THROWS_WITH_AS(norm(zeros({2, 3, 5}, kFloat64)),
                       "GroupNorm: expected 4 channels (axis 1), got an input of shape (2,3,5)", ShapeError);
  CHECK_THROWS_WITH_AS(nn::functional::group_norm(zeros({2, 6}), 4),
                       "group_norm: 4 groups do not split the 6 channels of an input of shape (2,6)", ValueError);
  CHECK_THROWS_WITH_AS(nn::functional::group_norm(zeros({6}), 2),
                       "group_norm: expected an input of shape (N, C, ...), got (6)", ShapeError);
  CHECK_THROWS_WITH_AS(nn::functional::group_norm(zeros({0, 4, 3}), 2),
                       "group_norm: the input of shape (0,4,3) is empty", ShapeError);
  CHECK_THROWS_WITH_AS(nn::functional::group_norm(zeros({2, 6}), 2, zeros({5})),
                       "group_norm: expected weight of shape (6) for an input of shape (2,6), got (5)", ShapeError);
}

TEST_CASE("instance norm: the modules' running statistics, eval, unbatched input and errors, as torch's") {
  // torch.nn.InstanceNorm1d(2, track_running_stats=True, momentum=0.5) in float64: one training batch,
  // then eval on an unbatched (C, L) input; num_batches_tracked stays 0 in torch's instance norms.
  nn::InstanceNorm1d norm{nn::InstanceNormOptions(2).track_running_stats(true).momentum(0.5)};
  norm->to(kFloat64);
  norm(tensor({1.0, 2, 4, 0, -1, 5, 3, 3, 0, 2, 2, 8}, kFloat64).reshape({2, 2, 3}));
  check_values(norm->running_mean(), {1.0833333333333335, 1.3333333333333333}, 1e-15);
  check_values(norm->running_var(), {1.8333333333333335, 6.083333333333334}, 1e-15);
  CHECK(names(norm->named_buffers()) == std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"});
  norm->eval();
  check_values(norm(tensor({1.0, 2, 3, 0, 1, 2}, kFloat64).reshape({2, 3})),
               {-0.061545577638320026, 0.6770013540215184, 1.4155482856813568, -0.5405894583996684,
                -0.13514736459991705, 0.2702947291998343},
               1e-12);
  // The defaults: no affine parameters, no running statistics, the instance's statistics in eval too.
  nn::InstanceNorm1d plain{nn::InstanceNormOptions(2)};
  plain->to(kFloat64);
  plain->eval();
  check_values(plain(tensor({1.0, 2, 4, 0, -1, 5}, kFloat64).reshape({2, 3})),
               {-1.0690415314502977, -0.2672603828625746, 1.3363019143128716, -0.5080001392911173, -0.8890002437594553,
                1.3970003830505726},
               1e-7);  // eps 1e-5 against variances of about 1.6 and 6.2
  CHECK(plain->named_parameters().empty());
  CHECK(plain->named_buffers().empty());
  nn::InstanceNorm2d affine{nn::InstanceNormOptions(3).affine(true)};
  CHECK(names(affine->named_parameters()) == std::vector<std::string>{"weight", "bias"});
  // Gradients, first and second order, through the instance statistics and the affine parameters.
  Generator gen(9);
  check_gradients(
      [](const TensorList& in) {
        return nn::functional::instance_norm(in[0], Tensor(), Tensor(), in[1], in[2], true, 0.1, 1e-3);
      },
      {randn({2, 3, 4, 2}, gen, kFloat64), randn({3}, gen, kFloat64), randn({3}, gen, kFloat64)});
  // Errors.
  CHECK_THROWS_WITH_AS(norm(zeros({2, 3, 3}, kFloat64)),
                       "InstanceNorm1d: expected an input of shape (N, C, L) or (C, L) with C = 2, got (2,3,3)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(affine(zeros({3, 4})),
                       "InstanceNorm2d: expected an input of shape (N, C, H, W) or (C, H, W) with C = 3, got (3,4)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(nn::functional::instance_norm(zeros({2, 3, 1})),
                       "instance_norm: the instance statistics need more than one spatial value, got an input of "
                       "shape (2,3,1)",
                       ValueError);
  CHECK_THROWS_WITH_AS(nn::functional::instance_norm(zeros({2, 3})),
                       "instance_norm: expected an input of shape (N, C, ...) with a spatial axis, got (2,3)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(nn::functional::instance_norm(zeros({2, 3, 4}), Tensor(), Tensor(), Tensor(), Tensor(), false),
                       "instance_norm: without use_input_stats, running_mean and running_var are needed", ValueError);
  CHECK_THROWS_WITH_AS(nn::functional::instance_norm(zeros({2, 3, 4}), zeros({3})),
                       "instance_norm: give both running_mean and running_var, or neither", ValueError);
  CHECK_THROWS_WITH_AS(nn::functional::instance_norm(zeros({2, 3, 4}), zeros({2}), ones({2})),
                       "instance_norm: expected running_mean of shape (3) for an input of shape (2,3,4), got (2)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(nn::InstanceNorm2d(nn::InstanceNormOptions(0)),
                       "InstanceNorm2d: num_features must be positive, got 0", ValueError);
  CHECK_THROWS_WITH_AS(nn::InstanceNorm1d(nn::InstanceNormOptions(2).momentum(1.5)),
                       "InstanceNorm1d: momentum must be in [0, 1], got 1.5", ValueError);
}
