#pragma once
// The optimisers' update loops over one parameter's contiguous buffer, with its gradient and
// state buffers of the same length: SGD (momentum, Nesterov), Adam / AdamW (AMSGrad), SparseAdam, Adagrad and RMSprop.
// The optimisers (tapegrad/optim) keep the options, the state and the bias corrections; these loops apply one step,
// vectorised and split over the thread pool so that the bits do not depend on the thread count. Defined for float and
// double.

#include <cstdint>

namespace tapegrad::kernels {

// One SGD step's constants.
struct SgdStep {
  double lr = 0.0;
  double weight_decay = 0.0;  // L2: d = g + weight_decay * p
  double momentum = 0.0;      // used only when the momentum buffer is given
  double dampening = 0.0;
  bool nesterov = false;
  bool first = false;  // the buffer's first step: it starts as d itself, undamped (as in torch)
};

// p -= lr * d with d = g (+ weight_decay p), through the momentum buffer buf when it is not
// null: buf = momentum buf + (1 - dampening) d, d = nesterov ? d + momentum buf : buf.
template <class T>
void sgd_update(T* param, const T* grad, T* buf, std::int64_t n, const SgdStep& step);

// One Adam or AdamW step's constants; step t's bias corrections come computed (in double).
struct AdamStep {
  double step_size = 0.0;   // lr / (1 - beta1^t)
  double bias2_sqrt = 1.0;  // sqrt(1 - beta2^t)
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled = false;  // AdamW: p *= decay before the step instead of adding weight_decay p to g
  double decay = 1.0;      // 1 - lr weight_decay, used when decoupled
};

// m = beta1 m + (1 - beta1) d, v = beta2 v + (1 - beta2) d^2 (d = g, + weight_decay p unless
// decoupled), vmax = max(vmax, v) when vmax is not null (AMSGrad, which then uses vmax for v),
// p -= step_size m / (sqrt(v) / bias2_sqrt + eps).
template <class T>
void adam_update(T* param, const T* grad, T* m, T* v, T* vmax, std::int64_t n, const AdamStep& step);

// One SparseAdam step's constants (torch.optim.SparseAdam's formula).
struct SparseAdamStep {
  double step_size = 0.0;  // lr sqrt(1 - beta2^t) / (1 - beta1^t)
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

// For each k < nnz, the row rows[k] of the (., dim) tables param, m and v, with its gradient row
// values[k]: m += (g - m)(1 - beta1), v += (g^2 - v)(1 - beta2), p -= step_size m / (sqrt(v) + eps). The
// rows must be distinct (a coalesced gradient); they are split over the thread pool, each row computed
// the same way whatever the thread count.
template <class T>
void sparse_adam_rows(T* param, T* m, T* v, const std::int64_t* rows, const T* values, std::int64_t nnz,
                      std::int64_t dim, const SparseAdamStep& step);

// One Adagrad step's constants (torch.optim.Adagrad's formula).
struct AdagradStep {
  double lr = 0.0;  // this step's lr / (1 + (t - 1) lr_decay)
  double weight_decay = 0.0;
  double eps = 1e-10;
};

// d = g (+ weight_decay p), sum += d^2, p -= lr d / (sqrt(sum) + eps), over n elements.
template <class T>
void adagrad_update(T* param, const T* grad, T* sum, std::int64_t n, const AdagradStep& step);

// The same for the rows rows[k] (distinct: a coalesced gradient) of the (., dim) tables param and
// sum, with gradient rows values[k], without weight decay; the other rows are not touched.
template <class T>
void adagrad_rows(T* param, T* sum, const std::int64_t* rows, const T* values, std::int64_t nnz, std::int64_t dim,
                  const AdagradStep& step);

// One RMSprop step's constants (torch.optim.RMSprop's formula).
struct RmspropStep {
  double lr = 0.0;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.0;  // used only when the momentum buffer is given
};

// d = g (+ weight_decay p), sq = alpha sq + (1 - alpha) d^2, then the denominator
// avg = sqrt(sq - ga^2) + eps with ga = alpha ga + (1 - alpha) d when grad_avg is given (centered),
// avg = sqrt(sq) + eps when it is null; p -= lr d / avg, or through the momentum buffer buf when it
// is given: buf = momentum buf + d / avg, p -= lr buf. Over n elements.
template <class T>
void rmsprop_update(T* param, const T* grad, T* square_avg, T* grad_avg, T* buf, std::int64_t n,
                    const RmspropStep& step);

}  // namespace tapegrad::kernels
