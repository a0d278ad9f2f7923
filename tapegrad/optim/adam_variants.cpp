#include "tapegrad/optim/adam_variants.h"

#include <algorithm>
#include <cmath>

#include "tapegrad/autograd/error.h"
#include "tapegrad/optim/elementwise_update.h"

namespace tapegrad::optim {

namespace {

// Checks the options every variant shares.
template <class Options>
void check_betas_and_eps(const Options& o, const char* name) {
  detail::check_betas(o.betas(), name);
  if (!(o.eps() >= 0.0)) throw ValueError(message(name, ": invalid eps ", o.eps(), " (must be >= 0)"));
}

// Adam's moments of g = grad + weight_decay * p at one element, updated in place (NAdam's and
// RAdam's); returns g.
template <class T>
T update_moments(T param, T grad, T& exp_avg, T& exp_avg_sq, double weight_decay, double beta1, double beta2) {
  const T g = grad + static_cast<T>(weight_decay) * param;
  exp_avg = exp_avg * static_cast<T>(beta1) + static_cast<T>(1.0 - beta1) * g;
  exp_avg_sq = exp_avg_sq * static_cast<T>(beta2) + static_cast<T>(1.0 - beta2) * g * g;
  return g;
}

}  // namespace

// ---------------------------------------------------------------- Adamax

Adamax::Adamax(const TensorList& params, const AdamaxOptions& options) : Adamax(single_group(params), options) {}

Adamax::Adamax(std::vector<ParamGroup> groups, const AdamaxOptions& options)
    : Optimizer(std::move(groups), GroupDefaults{options.lr(), options.weight_decay()}, "Adamax"), options_(options) {
  check_betas_and_eps(options_, "Adamax");
}

void Adamax::update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) {
  detail::start_buffers(*this, p, state);
  const auto [beta1, beta2] = options_.betas();
  const double weight_decay = *group.weight_decay, eps = options_.eps();
  const double step_size = *group.lr / (1.0 - std::pow(beta1, static_cast<double>(state.step)));
  dispatch_floating(p.dtype(), name_, [&](auto tag) {
    using T = decltype(tag);
    T* param = p.data_ptr<T>();
    const T* grad = g.data_ptr<T>();
    T* exp_avg = state.buffers["exp_avg"].data_ptr<T>();
    T* exp_inf = state.buffers["exp_inf"].data_ptr<T>();
    detail::for_each_element(p.numel(), [&](std::int64_t i) {
      const T gi = grad[i] + static_cast<T>(weight_decay) * param[i];
      exp_avg[i] = exp_avg[i] * static_cast<T>(beta1) + static_cast<T>(1.0 - beta1) * gi;
      exp_inf[i] = std::max(exp_inf[i] * static_cast<T>(beta2), std::abs(gi) + static_cast<T>(eps));
      param[i] -= static_cast<T>(step_size) * (exp_avg[i] / exp_inf[i]);
    });
  });
  detail::mark_written(state);
}

// ---------------------------------------------------------------- NAdam

NAdam::NAdam(const TensorList& params, const NAdamOptions& options) : NAdam(single_group(params), options) {}

NAdam::NAdam(std::vector<ParamGroup> groups, const NAdamOptions& options)
    : Optimizer(std::move(groups), GroupDefaults{options.lr(), options.weight_decay()}, "NAdam"), options_(options) {
  check_betas_and_eps(options_, "NAdam");
  if (!(options_.momentum_decay() >= 0.0))
    throw ValueError(message("NAdam: invalid momentum_decay ", options_.momentum_decay(), " (must be >= 0)"));
}

double NAdam::momentum(std::int64_t t) const {
  return std::get<0>(options_.betas()) *
         (1.0 - 0.5 * std::pow(0.96, static_cast<double>(t) * options_.momentum_decay()));
}

double NAdam::momentum_product(std::int64_t t) {
  while (static_cast<std::int64_t>(momentum_products_.size()) <= t) {
    const auto next = static_cast<std::int64_t>(momentum_products_.size());
    momentum_products_.push_back(momentum_products_.back() * momentum(next));
  }
  return momentum_products_[static_cast<std::size_t>(t)];
}

void NAdam::update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) {
  detail::start_buffers(*this, p, state);
  const auto [beta1, beta2] = options_.betas();
  const double lr = *group.lr, weight_decay = *group.weight_decay, eps = options_.eps();
  const std::int64_t t = state.step;
  const double bias2 = 1.0 - std::pow(beta2, static_cast<double>(t));
  const double mu = momentum(t), mu_next = momentum(t + 1);
  const double product = momentum_product(t);
  const double grad_step = lr * (1.0 - mu) / (1.0 - product);
  const double momentum_step = lr * mu_next / (1.0 - product * mu_next);
  dispatch_floating(p.dtype(), name_, [&](auto tag) {
    using T = decltype(tag);
    T* param = p.data_ptr<T>();
    const T* grad = g.data_ptr<T>();
    T* exp_avg = state.buffers["exp_avg"].data_ptr<T>();
    T* exp_avg_sq = state.buffers["exp_avg_sq"].data_ptr<T>();
    detail::for_each_element(p.numel(), [&](std::int64_t i) {
      const T gi = update_moments(param[i], grad[i], exp_avg[i], exp_avg_sq[i], weight_decay, beta1, beta2);
      const T denom = std::sqrt(exp_avg_sq[i] / static_cast<T>(bias2)) + static_cast<T>(eps);
      param[i] -= static_cast<T>(grad_step) * (gi / denom);
      param[i] -= static_cast<T>(momentum_step) * (exp_avg[i] / denom);
    });
  });
  detail::mark_written(state);
}

// ---------------------------------------------------------------- RAdam

RAdam::RAdam(const TensorList& params, const RAdamOptions& options) : RAdam(single_group(params), options) {}

RAdam::RAdam(std::vector<ParamGroup> groups, const RAdamOptions& options)
    : Optimizer(std::move(groups), GroupDefaults{options.lr(), options.weight_decay()}, "RAdam"), options_(options) {
  check_betas_and_eps(options_, "RAdam");
}

void RAdam::update(const ParamGroup& group, const Tensor& p, const Tensor& g, ParamState& state) {
  detail::start_buffers(*this, p, state);
  const auto [beta1, beta2] = options_.betas();
  const double lr = *group.lr, weight_decay = *group.weight_decay, eps = options_.eps();
  const auto t = static_cast<double>(state.step);
  const double bias1 = 1.0 - std::pow(beta1, t), bias2 = 1.0 - std::pow(beta2, t);
  // The length of the approximated simple moving average, and its limit.
  const double rho_inf = 2.0 / (1.0 - beta2) - 1.0;
  const double rho_t = rho_inf - 2.0 * t * std::pow(beta2, t) / bias2;
  const bool rectified = rho_t > 5.0;
  const double rect =
      rectified ? std::sqrt((rho_t - 4.0) * (rho_t - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t))
                : 0.0;
  dispatch_floating(p.dtype(), name_, [&](auto tag) {
    using T = decltype(tag);
    T* param = p.data_ptr<T>();
    const T* grad = g.data_ptr<T>();
    T* exp_avg = state.buffers["exp_avg"].data_ptr<T>();
    T* exp_avg_sq = state.buffers["exp_avg_sq"].data_ptr<T>();
    detail::for_each_element(p.numel(), [&](std::int64_t i) {
      update_moments(param[i], grad[i], exp_avg[i], exp_avg_sq[i], weight_decay, beta1, beta2);
      const T corrected = exp_avg[i] / static_cast<T>(bias1);
      if (rectified) {
        const T adaptive = static_cast<T>(std::sqrt(bias2)) / (std::sqrt(exp_avg_sq[i]) + static_cast<T>(eps));
        param[i] -= corrected * static_cast<T>(lr) * adaptive * static_cast<T>(rect);
      } else {
        param[i] -= corrected * static_cast<T>(lr);
      }
    });
  });
  detail::mark_written(state);
}

}  // namespace tapegrad::optim
