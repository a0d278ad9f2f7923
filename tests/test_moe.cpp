// Mixture of experts: grouped dispatch against the per-token loop, auxiliary losses on
// constructed routings, router gradients, float64 gradcheck.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tapegrad/nn/nn.h"
#include "tests/testing.h"

using namespace tapegrad;
using tapegrad::testing::check_gradients;
using tapegrad::testing::check_values;
using tapegrad::testing::max_abs_diff;
using tapegrad::testing::parameter;

namespace {

// A 4-expert layer whose router is c * identity, so token e_i (one-hot) scores c for expert i
// and 0 for the others: softmax gives a = e^c / (e^c + 3) to expert i and b = 1 / (e^c + 3)
// to each other expert.
nn::MixtureOfExperts constructed_router(double c, std::int64_t top_k) {
  manual_seed(0);
  nn::MoEOptions options(4);
  options.num_experts(4);
  options.top_k(top_k);
  options.hidden(3);
  nn::MixtureOfExperts moe(options);
  NoGradGuard guard;
  moe->router()->weight().zero_();
  for (std::int64_t i = 0; i < 4; ++i) moe->router()->weight().set({i, i}, c);
  return moe;
}

Tensor one_hot_tokens(const std::vector<std::int64_t>& experts) {
  return one_hot(from_vector(experts, {static_cast<std::int64_t>(experts.size())}), 4, kFloat32);
}

}  // namespace

TEST_CASE("moe: grouped dispatch equals the per-token loop of the reference") {
  manual_seed(1);
  Generator& gen = default_generator();  // the modules and the inputs draw from it
  for (auto weighting : {nn::RouterWeighting::SoftmaxTopK, nn::RouterWeighting::SoftmaxThenTopK}) {
    nn::MoEOptions options(6);
    options.num_experts(5);
    options.top_k(2);
    options.hidden(7);
    options.weighting(weighting);
    nn::MixtureOfExperts moe(options);
    const Tensor x = randn({2, 9, 6}, gen);  // (B, N, D)
    const nn::MoEOutput result = moe(x);
    CHECK(result.output.shape() == x.shape());

    // The seed's loop: token by token, expert by expert.
    const Tensor tokens = x.reshape({18, 6});
    const Tensor logits = matmul(tokens, moe->router()->weight().mT());
    const Tensor probs = softmax(logits, -1);
    for (std::int64_t t = 0; t < 18; ++t) {
      auto [scores, ids] = topk(logits.select(0, t), 2);
      Tensor w = softmax(scores, -1);
      if (weighting == nn::RouterWeighting::SoftmaxThenTopK) {
        Tensor picked = index_select(probs.select(0, t), 0, ids);
        w = picked / picked.sum();
      }
      Tensor expected = zeros({6});
      for (std::int64_t j = 0; j < 2; ++j) {
        const std::int64_t e = static_cast<std::int64_t>(ids.at({j}));
        expected = expected + (*moe->expert(e))(tokens.select(0, t).unsqueeze(0)).squeeze(0) * w.at({j});
      }
      const Tensor got = result.output.reshape({18, 6}).select(0, t);
      CHECK((got - expected).abs().max().item() < 1e-5);
    }
    std::int64_t assigned = 0, top1 = 0;
    for (std::int64_t c : result.tokens_per_expert) assigned += c;
    for (std::int64_t c : result.top1_per_expert) top1 += c;
    CHECK(assigned == 36);
    CHECK(top1 == 18);
    CHECK((result.routing_weights.sum({-1}) - 1.0).abs().max().item() < 1e-6);
  }
}

TEST_CASE("moe: load-balancing loss on constructed routings") {
  const double c = std::log(3.0);  // a = 3/6 = 0.5, b = 1/6
  nn::MixtureOfExperts moe = constructed_router(c, 1);
  // Perfectly balanced: every expert is some token's top-1 (f_i = 1/4) and P_i = (a + 3b)/4 = 1/4.
  nn::MoEOutput balanced = moe(one_hot_tokens({0, 1, 2, 3}));
  CHECK(balanced.load_balancing_loss.item() == doctest::Approx(1.0).epsilon(1e-6));
  CHECK(balanced.importance_loss.item() == doctest::Approx(0.0));  // k = 1: importance (1, 1, 1, 1)
  CHECK(balanced.top1_per_expert == std::vector<std::int64_t>{1, 1, 1, 1});
  // Everything to expert 0: f = (1, 0, 0, 0), P_0 = a = 0.5, loss = 4 * 0.5 = 2.
  nn::MoEOutput collapsed = moe(one_hot_tokens({0, 0, 0, 0}));
  CHECK(collapsed.load_balancing_loss.item() == doctest::Approx(2.0).epsilon(1e-6));
  // importance (4, 0, 0, 0): mean 1, population variance (9 + 1 + 1 + 1) / 4 = 3.
  CHECK(collapsed.importance_loss.item() == doctest::Approx(3.0).epsilon(1e-6));
  // z-loss: logsumexp(c, 0, 0, 0) = log(3 + 3) for every token.
  CHECK(collapsed.router_z_loss.item() == doctest::Approx(std::log(6.0) * std::log(6.0)).epsilon(1e-6));
  // A router that scores all experts the same: P_i = 1/4 whatever the top-1 ties resolve to.
  nn::MixtureOfExperts flat = constructed_router(0.0, 2);
  CHECK(flat(one_hot_tokens({0, 1, 2})).load_balancing_loss.item() == doctest::Approx(1.0).epsilon(1e-6));
}

TEST_CASE("moe: the router receives gradients from the output and the auxiliary loss") {
  manual_seed(2);
  Generator& gen = default_generator();  // the modules and the inputs draw from it
  nn::MoEOptions options(6);
  options.num_experts(4);
  options.hidden(8);
  nn::MixtureOfExperts moe(options);
  const Tensor x = randn({10, 6}, gen);
  nn::MoEOutput result = moe(x);
  (result.output.pow(2.0).mean() + 0.01 * result.load_balancing_loss).backward();
  CHECK(moe->router()->weight().grad().abs().sum().item() > 0.0);
  // Through the balance loss alone the router still learns (gradient via P).
  moe->zero_grad();
  moe(x).load_balancing_loss.backward();
  CHECK(moe->router()->weight().grad().abs().sum().item() > 0.0);
  CHECK(moe->named_parameters()[0].first == "router.weight");
  CHECK(moe->named_parameters()[1].first == "experts.0.fc1.weight");
}

TEST_CASE("moe: float64 gradcheck of the layer and its auxiliary losses") {
  manual_seed(3);
  Generator& gen = default_generator();  // the modules and the inputs draw from it
  for (auto weighting : {nn::RouterWeighting::SoftmaxTopK, nn::RouterWeighting::SoftmaxThenTopK}) {
    nn::MoEOptions options(4);
    options.num_experts(3);
    options.top_k(2);
    options.hidden(4);
    options.weighting(weighting);
    options.activation(nn::Activation::GELU);
    nn::MixtureOfExperts moe(options);
    moe->to(kFloat64);
    const Tensor x = randn({5, 4}, gen, kFloat64);
    check_gradients(
        [&](const TensorList& in) {
          nn::MoEOutput r = moe(in[0]);
          return concat({r.output.reshape({-1}), r.load_balancing_loss.reshape({1}), r.importance_loss.reshape({1}),
                         r.router_z_loss.reshape({1})},
                        0);
        },
        {x}, {}, moe->parameters());
  }
}

TEST_CASE("moe: errors") {
  manual_seed(0);
  nn::MoEOptions options(4);
  options.num_experts(2);
  options.top_k(3);
  CHECK_THROWS_WITH_AS(nn::MixtureOfExperts{options},
                       "MixtureOfExperts: need 0 < top_k <= num_experts, got top_k 3 and num_experts 2", ValueError);
  options.top_k(1);
  options.hidden(3);
  nn::MixtureOfExperts moe(options);
  CHECK_THROWS_WITH_AS(moe(zeros({2, 5})), "MixtureOfExperts: expected input with last dimension 4, got shape (2,5)",
                       ShapeError);
}

TEST_CASE("moe: routing functions on router logits equal what the module reports") {
  for (const auto weighting : {nn::RouterWeighting::SoftmaxTopK, nn::RouterWeighting::SoftmaxThenTopK}) {
    CAPTURE(static_cast<int>(weighting));
    Generator gen(9);
    nn::MixtureOfExperts moe{nn::MoEOptions(6).num_experts(5).top_k(2).hidden(4).weighting(weighting).generator(&gen)};
    const Tensor x = randn({3, 7, 6}, gen);
    const nn::MoEOutput out = moe(x);
    const Tensor logits = out.router_logits;  // (21, 5)
    const auto [ids, weights] = nn::top_k_routing(logits, 2, weighting);
    CHECK(ids.to_vector<std::int64_t>() == out.expert_indices.to_vector<std::int64_t>());
    CHECK(weights.to_vector<float>() == out.routing_weights.to_vector<float>());
    CHECK(nn::load_balancing_loss(logits, ids).item() == out.load_balancing_loss.item());
    CHECK(nn::load_balancing_loss(logits).item() == out.load_balancing_loss.item());  // top-1 = argmax
    CHECK(nn::importance_loss(ids, weights, 5).item() == out.importance_loss.item());
    CHECK(nn::router_z_loss(logits).item() == out.router_z_loss.item());
  }
  // Hand-worked: 2 tokens, 2 experts, logits [[log 3, 0], [log 3, 0]]: probs (3/4, 1/4) for both, f = (1, 0),
  // load balancing = 2 * (1 * 3/4) = 1.5; z = log(4)^2.
  const Tensor logits = from_vector(std::vector<double>{std::log(3.0), 0.0, std::log(3.0), 0.0}, {2, 2});
  check_values(nn::load_balancing_loss(logits), {1.5}, 1e-12);
  check_values(nn::router_z_loss(logits), {std::log(4.0) * std::log(4.0)}, 1e-12);
  // The losses differentiate with respect to the logits (the assignment is held fixed: away from ties).
  Generator gen(10);
  const Tensor z = randn({6, 4}, gen, kFloat64);
  check_gradients([](const TensorList& in) { return nn::load_balancing_loss(in[0]); }, {z});
  check_gradients([](const TensorList& in) { return nn::router_z_loss(in[0]); }, {z});
  check_gradients(
      [](const TensorList& in) {
        const auto [ids, w] = nn::top_k_routing(in[0], 2, nn::RouterWeighting::SoftmaxThenTopK);
        return nn::importance_loss(ids, w, 4);
      },
      {z});
  CHECK_THROWS_WITH_AS(nn::top_k_routing(z, 5, nn::RouterWeighting::SoftmaxTopK),
                       "top_k_routing: need 0 < k <= experts, got k 5 and 4 experts", ValueError);
  CHECK_THROWS_WITH_AS(nn::router_z_loss(z.reshape({24})),
                       "router_z_loss: router logits must be (tokens, experts), got shape (24)", ShapeError);
  CHECK_THROWS_WITH_AS(nn::load_balancing_loss(z, from_vector(std::vector<std::int64_t>{7, 0, 0, 0, 0, 0}, {6, 1})),
                       "load_balancing_loss: expert index 7 is out of range for 4 experts", IndexError);
}

namespace {

// A noisy-gating layer with a capacity, its noise projection set to random values (it starts at
// zero) so each token's noise scale differs.
nn::MixtureOfExperts noisy_moe(double capacity_factor) {
  manual_seed(11);
  nn::MixtureOfExperts moe(
      nn::MoEOptions(6).num_experts(4).top_k(2).hidden(5).noisy_gating(true).capacity_factor(capacity_factor));
  NoGradGuard no_grad;
  const Tensor noise = parameter(*moe, "noise.weight");
  noise.copy_(randn(noise.shape(), default_generator()) * 0.5);
  return moe;
}

double cdf(double z) { return 0.5 * (1.0 + std::erf(z / std::sqrt(2.0))); }

}  // namespace

TEST_CASE("moe: noisy gating adds softplus-scaled noise in training only, from the module's generator") {
  nn::MixtureOfExperts moe = noisy_moe(0.0);
  const Tensor x = randn({10, 6}, default_generator());
  const std::string state = moe->noise_generator().state();
  const nn::MoEOutput noisy = moe(x);
  Generator same;
  same.set_state(state);
  const Tensor expected_std = softplus(matmul(x, parameter(*moe, "noise.weight").mT())) + 1e-2;
  CHECK(max_abs_diff(noisy.noise_stddev, expected_std) < 1e-6);
  const Tensor expected = noisy.clean_logits + randn({10, 4}, same) * expected_std;
  CHECK(max_abs_diff(noisy.router_logits, expected) < 1e-6);
  CHECK(max_abs_diff(noisy.router_logits, noisy.clean_logits) > 0.1);
  moe->eval();
  const nn::MoEOutput clean = moe(x);
  CHECK(clean.router_logits.to_vector<float>() == clean.clean_logits.to_vector<float>());
  CHECK(clean.load_loss.defined());
  nn::MixtureOfExperts plain(nn::MoEOptions(6).num_experts(4).top_k(2).hidden(5));
  CHECK_FALSE(plain(x).load_loss.defined());
  // The noise projection, too, draws its initial weights from the generator the options name.
  Generator own(21);
  const std::string before = default_generator().state();
  nn::MixtureOfExperts mine(nn::MoEOptions(6).num_experts(4).top_k(2).hidden(5).noisy_gating(true).generator(&own));
  CHECK(default_generator().state() == before);
}

TEST_CASE("moe: the noisy load loss equals the paper's formula, token by token") {
  nn::MixtureOfExperts moe = noisy_moe(0.0);
  const Tensor x = randn({12, 6}, default_generator());
  const nn::MoEOutput r = moe(x);
  const std::vector<float> clean = r.clean_logits.to_vector<float>(), noisy = r.router_logits.to_vector<float>(),
                           stddev = r.noise_stddev.to_vector<float>();
  std::vector<double> load(4, 0.0);
  for (std::size_t t = 0; t < 12; ++t)
    for (std::size_t i = 0; i < 4; ++i) {
      // The k-th largest (k = 2) of the noisy logits without entry i.
      std::vector<double> others;
      for (std::size_t j = 0; j < 4; ++j)
        if (j != i) others.push_back(noisy[t * 4 + j]);
      std::sort(others.begin(), others.end(), std::greater<double>());
      load[i] += cdf((clean[t * 4 + i] - others[1]) / stddev[t * 4 + i]);
    }
  double mean = 0.0, var = 0.0;
  for (double l : load) mean += l / 4.0;
  for (double l : load) var += (l - mean) * (l - mean) / 4.0;
  CHECK(r.load_loss.item() == doctest::Approx(var / (mean * mean)).epsilon(1e-4));
}

TEST_CASE("moe: a capacity drops later choices first and equals the per-token loop with the drops") {
  manual_seed(12);
  nn::MixtureOfExperts moe(nn::MoEOptions(6).num_experts(4).top_k(2).hidden(5).capacity_factor(0.5));
  // Positive tokens and a router row of 3s for expert 0: nearly every token's first choice.
  const Tensor x = randn({16, 6}, default_generator()).abs();
  {
    NoGradGuard no_grad;
    moe->router()->weight().select(0, 0).copy_(ones({6}) * 3.0);
  }
  const nn::MoEOutput r = moe(x);
  CHECK(r.capacity == 4);  // ceil(0.5 * 16 * 2 / 4)
  const std::vector<std::int64_t> ids = r.expert_indices.to_vector<std::int64_t>();
  // The loop: slot 0 for every token in order, then slot 1; each expert keeps its first `capacity`.
  std::vector<std::int64_t> taken(4, 0), dropped(4, 0);
  std::vector<std::vector<bool>> kept(16, std::vector<bool>(2, false));
  for (std::size_t j = 0; j < 2; ++j)
    for (std::size_t t = 0; t < 16; ++t) {
      const auto e = static_cast<std::size_t>(ids[t * 2 + j]);
      if (taken[e] < 4) {
        ++taken[e];
        kept[t][j] = true;
      } else {
        ++dropped[e];
      }
    }
  CHECK(r.tokens_per_expert == taken);
  CHECK(r.dropped_per_expert == dropped);
  std::int64_t dropped_sum = 0, tokens_dropped = 0;
  for (std::int64_t d : dropped) dropped_sum += d;
  for (const auto& k : kept) tokens_dropped += !k[0] && !k[1];
  CHECK(r.dropped_assignments == dropped_sum);
  CHECK(r.dropped_tokens == tokens_dropped);
  CHECK(dropped[0] > 0);  // expert 0 was everyone's first choice
  CHECK(tokens_dropped > 0);
  const std::vector<float> w = r.routing_weights.to_vector<float>();
  for (std::int64_t t = 0; t < 16; ++t) {
    Tensor expected = zeros({6});
    for (std::size_t j = 0; j < 2; ++j)
      if (kept[static_cast<std::size_t>(t)][j]) {
        const std::int64_t e = ids[static_cast<std::size_t>(t) * 2 + j];
        expected = expected + (*moe->expert(e))(x.select(0, t).unsqueeze(0)).squeeze(0) *
                                  static_cast<double>(w[static_cast<std::size_t>(t) * 2 + j]);
      }
    CHECK(max_abs_diff(r.output.select(0, t), expected) < 1e-5);
  }
}

TEST_CASE("moe: float64 gradcheck and gradgradcheck of noisy gating with a capacity, output and load loss") {
  nn::MixtureOfExperts moe = noisy_moe(0.75);
  moe->to(kFloat64);
  const Tensor x = randn({6, 6}, default_generator(), kFloat64);
  const auto f = [&](const TensorList&) {
    moe->noise_generator().manual_seed(3);  // the same noise at every evaluation
    const nn::MoEOutput r = moe(x);
    return concat({r.output.reshape({-1}), r.load_loss.reshape({1})}, 0);
  };
  check_gradients(f, {}, {}, moe->parameters());
  moe->noise_generator().manual_seed(3);
  CHECK(moe(x).dropped_assignments > 0);  // the capacity binds in what was checked
}

TEST_CASE("moe: noisy gating and capacity options out of range are ValueErrors") {
  CHECK_THROWS_WITH_AS(nn::MixtureOfExperts(nn::MoEOptions(4).num_experts(2).top_k(1).capacity_factor(-1.0)),
                       "MixtureOfExperts: capacity_factor and noise_epsilon must be >= 0, got -1 and 0.01", ValueError);
  CHECK_THROWS_WITH_AS(nn::MixtureOfExperts(nn::MoEOptions(4).num_experts(2).top_k(2).noisy_gating(true)),
                       "MixtureOfExperts: noisy gating needs top_k below num_experts, got 2 of 2", ValueError);
}

TEST_CASE("erf: values, gradients and the normal CDF") {
  Generator gen(13);
  const Tensor x = randn({7}, gen, kFloat64).requires_grad_();
  const std::vector<double> xs = x.to_vector<double>(), ys = erf(x).to_vector<double>();
  for (std::size_t i = 0; i < xs.size(); ++i) CHECK(ys[i] == doctest::Approx(std::erf(xs[i])).epsilon(1e-15));
  check_gradients([](const TensorList& in) { return erf(in[0]); }, {x});
  CHECK(nn::normal_cdf(scalar_tensor(1.0, kFloat64)).item() == doctest::Approx(0.8413447460685429).epsilon(1e-12));
}

TEST_CASE("moe: noisy_top_k_load_loss refuses mismatched shapes and a k that leaves no expert out") {
  const Tensor logits = zeros({3, 4}), stddev = ones({3, 4});
  CHECK_THROWS_WITH_AS(nn::noisy_top_k_load_loss(logits, zeros({3, 5}), stddev, 2),
                       "noisy_top_k_load_loss: clean logits (3,4), noisy logits (3,5) and noise stddev (3,4) must "
                       "have one shape",
                       ShapeError);
  CHECK_THROWS_WITH_AS(nn::noisy_top_k_load_loss(logits, logits, stddev, 4),
                       "noisy_top_k_load_loss: need 0 < k < E, got k 4 and E 4", ValueError);
}
