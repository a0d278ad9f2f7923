#include "tapegrad/autograd/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "tapegrad/autograd/ops.h"
#include "tapegrad/autograd/storage.h"

namespace tapegrad {

namespace {

// Evaluates f and checks that it produced a float64 tensor.
Tensor evaluate(const GradcheckFunction& f, const TensorList& inputs) {
  Tensor y = f(inputs);
  if (!y.defined()) throw ValueError("gradcheck: the function returned an undefined tensor");
  if (y.dtype() != kFloat64)
    throw TypeError(message("gradcheck: the function returned a ", dtype_name(y.dtype()),
                            " tensor; build the output from the float64 inputs it is given"));
  return y;
}

// Records one comparison in the input's report if it is the worst so far.
void compare(GradcheckInputReport& report, double analytic, double numeric, const GradcheckOptions& options,
             std::int64_t output_index, std::int64_t input_index, int direction) {
  const double error = std::abs(analytic - numeric);
  const double tolerance = options.atol + options.rtol * std::abs(numeric);
  const double ratio = std::isnan(error) ? INFINITY : error / tolerance;
  if (ratio > report.ratio) {
    report.output_index = output_index;
    report.input_index = input_index;
    report.direction = direction;
    report.analytic = analytic;
    report.numeric = numeric;
    report.abs_error = error;
    report.tolerance = tolerance;
    report.ratio = ratio;
  }
  if (!(error <= tolerance)) report.passed = false;
}

// Gradients of sum(y * upstream) with respect to every differentiated input (zeros where the
// graph does not reach).
std::vector<std::vector<double>> analytic_grads(const Tensor& y, const Tensor& upstream, const TensorList& inputs,
                                                const std::vector<bool>& differentiated) {
  for (std::size_t k = 0; k < inputs.size(); ++k)
    if (differentiated[k]) inputs[k].zero_grad(/*set_to_none=*/true);
  if (y.requires_grad()) y.backward(upstream, /*retain_graph=*/true);
  std::vector<std::vector<double>> grads(inputs.size());
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (!differentiated[k]) continue;
    const Tensor g = inputs[k].grad();
    grads[k] =
        g.defined() ? g.to_vector<double>() : std::vector<double>(static_cast<std::size_t>(inputs[k].numel()), 0.0);
  }
  return grads;
}

double dot(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>();
  const std::vector<double> y = b.to_vector<double>();
  double s = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

}  // namespace

std::string GradcheckResult::message() const {
  std::ostringstream out;
  out.precision(10);
  out << "gradcheck " << (passed ? "passed" : "FAILED") << " ("
      << (full_jacobian ? "full Jacobian" : "random directions") << ")";
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const GradcheckInputReport& r = inputs[k];
    if (r.name.empty()) out << "\n  input " << k << " " << r.shape.str() << ": ";
    else out << "\n  parameter '" << r.name << "' " << r.shape.str() << ": ";
    if (!r.differentiated) {
      out << "not differentiated";
      continue;
    }
    out << (r.passed ? "ok" : "MISMATCH") << ", worst ";
    if (r.direction >= 0) out << "direction " << r.direction;
    else if (!r.name.empty()) out << "element " << r.input_index << " of d out[" << r.output_index << "]";
    else out << "d out[" << r.output_index << "] / d in[" << r.input_index << "]";
    out << ": analytic " << r.analytic << ", numeric " << r.numeric << ", |diff| " << r.abs_error << " (tolerance "
        << r.tolerance << ")";
  }
  return out.str();
}

namespace {

// Both overloads; `names` is empty or holds one name per parameter.
GradcheckResult check(const GradcheckFunction& f, const TensorList& inputs, const GradcheckOptions& options,
                      const TensorList& parameters, const std::vector<std::string>& names) {
  if (!(options.eps > 0)) throw ValueError(message("gradcheck: eps must be positive, got ", options.eps));
  GradcheckResult result;
  TensorList x;
  std::vector<bool> differentiated;
  std::int64_t total_in = 0;
  for (const Tensor& input : inputs) {
    GradcheckInputReport report;
    report.shape = input.shape();
    if (input.is_floating_point()) {
      Tensor copy;
      {
        NoGradGuard guard;
        copy = input.detach().to(kFloat64).clone();
      }
      copy.requires_grad_(true);
      x.push_back(copy);
      differentiated.push_back(true);
      report.differentiated = true;
      total_in += input.numel();
    } else {
      x.push_back(input);
      differentiated.push_back(false);
    }
    result.inputs.push_back(report);
  }
  // What gets perturbed and differentiated: the inputs' float64 copies, then the parameters,
  // which f reads directly and which are perturbed in place.
  TensorList targets = x;
  for (std::size_t j = 0; j < parameters.size(); ++j) {
    const Tensor& p = parameters[j];
    if (!p.defined() || p.dtype() != kFloat64 || !p.is_leaf() || !p.requires_grad() || !p.is_contiguous())
      throw ValueError(
          message("gradcheck: parameter ", (names.empty() ? std::to_string(j) : "'" + names[j] + "'"),
                  " must be a contiguous float64 leaf that requires grad (convert the module with to(kFloat64))"));
    GradcheckInputReport report;
    if (!names.empty()) report.name = names[j];
    report.shape = p.shape();
    report.differentiated = true;
    result.inputs.push_back(report);
    targets.push_back(p);
    differentiated.push_back(true);
    total_in += p.numel();
  }

  const Tensor y = evaluate(f, x);
  const std::int64_t n_out = y.numel();
  result.full_jacobian = n_out * total_in <= options.full_jacobian_limit;

  // Central difference of g(y) = sum(y * weights) along `direction` of input k. The perturbations
  // are in-place writes of the target, counted in its version so that a graph which saved the
  // target can tell it changed; every backward through y therefore runs before the first of them.
  auto numeric_derivative = [&](std::size_t k, const std::vector<double>& direction, const Tensor& weights) {
    double* p = targets[k].data_ptr<double>();
    const std::vector<double> saved(p, p + targets[k].numel());
    NoGradGuard guard;
    for (std::size_t i = 0; i < saved.size(); ++i) p[i] = saved[i] + options.eps * direction[i];
    const double plus = dot(evaluate(f, x), weights);
    for (std::size_t i = 0; i < saved.size(); ++i) p[i] = saved[i] - options.eps * direction[i];
    const double minus = dot(evaluate(f, x), weights);
    for (std::size_t i = 0; i < saved.size(); ++i) p[i] = saved[i];
    targets[k].impl()->storage->bump_version();
    return (plus - minus) / (2 * options.eps);
  };

  if (result.full_jacobian) {
    // analytic[o][k][i] = d y[o] / d x_k[i], one backward per output element.
    std::vector<std::vector<std::vector<double>>> analytic;
    for (std::int64_t o = 0; o < n_out; ++o) {
      Tensor onehot = zeros(y.shape(), kFloat64);
      onehot.data_ptr<double>()[o] = 1.0;
      analytic.push_back(analytic_grads(y, onehot, targets, differentiated));
    }
    for (std::size_t k = 0; k < targets.size(); ++k) {
      if (!differentiated[k]) continue;
      const std::int64_t n_in = targets[k].numel();
      for (std::int64_t i = 0; i < n_in; ++i) {
        // One column of the Jacobian: perturb x_k[i], difference every output.
        double* p = targets[k].data_ptr<double>();
        const double saved = p[i];
        // Read each output before the next perturbation: f may return a view of its input.
        std::vector<double> up, down;
        {
          NoGradGuard guard;
          p[i] = saved + options.eps;
          up = evaluate(f, x).to_vector<double>();
          p[i] = saved - options.eps;
          down = evaluate(f, x).to_vector<double>();
          p[i] = saved;
          targets[k].impl()->storage->bump_version();
        }
        for (std::int64_t o = 0; o < n_out; ++o) {
          const double numeric = (up[o] - down[o]) / (2 * options.eps);
          compare(result.inputs[k], analytic[o][k][i], numeric, options, o, i, -1);
        }
      }
    }
  } else {
    // Per direction d: an upstream gradient u over y and a direction v[k] in each differentiated
    // input, drawn in that order; all backwards first (see numeric_derivative), then the differences.
    struct Direction {
      Tensor u;
      std::vector<std::vector<double>> grads, v;
    };
    Generator gen(options.seed);
    std::vector<Direction> directions(static_cast<std::size_t>(std::max(options.random_directions, 0)));
    for (Direction& dir : directions) {
      dir.u = randn(y.shape(), gen, kFloat64);
      dir.grads = analytic_grads(y, dir.u, targets, differentiated);
      dir.v.resize(targets.size());
      for (std::size_t k = 0; k < targets.size(); ++k)
        if (differentiated[k]) dir.v[k] = randn(targets[k].shape(), gen, kFloat64).to_vector<double>();
    }
    for (std::size_t d = 0; d < directions.size(); ++d) {
      const Direction& dir = directions[d];
      for (std::size_t k = 0; k < targets.size(); ++k) {
        if (!differentiated[k]) continue;
        double analytic = 0.0;
        for (std::size_t i = 0; i < dir.v[k].size(); ++i) analytic += dir.grads[k][i] * dir.v[k][i];
        compare(result.inputs[k], analytic, numeric_derivative(k, dir.v[k], dir.u), options, -1, -1,
                static_cast<int>(d));
      }
    }
  }
  for (const GradcheckInputReport& r : result.inputs) result.passed = result.passed && r.passed;
  return result;
}

}  // namespace

GradcheckResult gradcheck(const GradcheckFunction& f, const TensorList& inputs, const GradcheckOptions& options,
                          const TensorList& parameters) {
  return check(f, inputs, options, parameters, {});
}

GradcheckResult gradcheck(const GradcheckFunction& f, const TensorList& inputs, const NamedTensors& parameters,
                          const GradcheckOptions& options) {
  TensorList tensors;
  std::vector<std::string> names;
  for (const auto& [name, p] : parameters) {
    names.push_back(name);
    tensors.push_back(p);
  }
  return check(f, inputs, options, tensors, names);
}

namespace {

// gradgradcheck's function: (inputs..., u) -> the gradients of sum(f(inputs) * u) with respect
// to the differentiated inputs and the parameters, flattened and joined, taped so that gradcheck
// can differentiate them once more.
GradcheckResult check_second_order(const GradcheckFunction& f, const TensorList& inputs,
                                   const GradcheckOptions& options, const TensorList& parameters,
                                   const std::vector<std::string>& names) {
  TensorList x;
  for (const Tensor& input : inputs) {
    NoGradGuard guard;
    x.push_back(input.is_floating_point() ? input.detach().to(kFloat64).clone() : input);
  }
  Shape out_shape;
  {
    NoGradGuard guard;
    out_shape = evaluate(f, x).shape();
  }
  Generator gen(options.seed + 1);
  TensorList extended = inputs;
  extended.push_back(randn(out_shape, gen, kFloat64));
  const std::size_t n = inputs.size();
  auto first_order = [&f, &parameters, n](const TensorList& args) {
    const TensorList xs(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(n));
    TensorList wrt;
    for (const Tensor& t : xs)
      if (t.is_floating_point()) wrt.push_back(t);
    for (const Tensor& p : parameters) wrt.push_back(p);
    // gradcheck evaluates the function for its finite differences under no-grad; the gradients
    // inside need the graph, so grad mode is on here whatever the caller's.
    const bool previous = is_grad_enabled();
    set_grad_enabled(true);
    struct Restore {
      bool previous;
      ~Restore() { set_grad_enabled(previous); }
    } restore{previous};
    const Tensor y = evaluate(f, xs);
    TensorList pieces;
    if (y.requires_grad()) {
      autograd::GradOptions grad_options;
      grad_options.create_graph = true;
      grad_options.allow_unused = true;
      const TensorList grads = autograd::grad({y}, wrt, {args[n]}, grad_options);
      for (std::size_t k = 0; k < wrt.size(); ++k)
        pieces.push_back(grads[k].defined() ? grads[k].reshape({wrt[k].numel()}) : zeros({wrt[k].numel()}, kFloat64));
    } else {
      for (const Tensor& t : wrt) pieces.push_back(zeros({t.numel()}, kFloat64));
    }
    // Depends on u even where f is linear in everything, so the result always requires grad.
    pieces.push_back(args[n].reshape({args[n].numel()}) * 0.0);
    return concat(pieces, 0);
  };
  GradcheckResult result = check(first_order, extended, options, parameters, names);
  GradcheckInputReport& u_report = result.inputs[n];
  u_report.name = "grad_output";
  return result;
}

}  // namespace

GradcheckResult gradgradcheck(const GradcheckFunction& f, const TensorList& inputs, const GradcheckOptions& options,
                              const TensorList& parameters) {
  return check_second_order(f, inputs, options, parameters, {});
}

GradcheckResult gradgradcheck(const GradcheckFunction& f, const TensorList& inputs, const NamedTensors& parameters,
                              const GradcheckOptions& options) {
  TensorList tensors;
  std::vector<std::string> names;
  for (const auto& [name, p] : parameters) {
    names.push_back(name);
    tensors.push_back(p);
  }
  return check_second_order(f, inputs, options, tensors, names);
}

}  // namespace tapegrad
