// The optimisers' update loops (optim.h): one element's update written once, for xsimd batches
// and for scalars, so the vector body and the scalar tail apply the same operations in order.

#include "tapegrad/autograd/kernels/optim.h"

#include <algorithm>
#include <tuple>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "tapegrad/autograd/kernels/strided.h"
#include "tapegrad/autograd/parallel.h"

namespace tapegrad::kernels {

template <class T>
void sgd_update(T* param, const T* grad, T* buf, std::int64_t n, const SgdStep& step) {
  // param, grad, buf: (n)
  const T lr = static_cast<T>(step.lr), wd = static_cast<T>(step.weight_decay);
  const T momentum = static_cast<T>(step.momentum), keep = static_cast<T>(1.0 - step.dampening);
  const bool nesterov = step.nesterov, first = step.first, use_momentum = buf != nullptr;
  parallel_for_blocks(n, kElementwiseGrain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t k = lo; k < hi; ++k) {
      T d = grad[k];
      if (wd != T(0)) d += wd * param[k];
      if (use_momentum) {
        buf[k] = first ? d : momentum * buf[k] + keep * d;
        d = nesterov ? d + momentum * buf[k] : buf[k];
      }
      param[k] -= lr * d;
    }
  });
}

template void sgd_update<float>(float*, const float*, float*, std::int64_t, const SgdStep&);
template void sgd_update<double>(double*, const double*, double*, std::int64_t, const SgdStep&);

template <class T>
void adam_update(T* param, const T* grad, T* m, T* v, T* vmax, std::int64_t n, const AdamStep& step) {
  // param, grad, m, v, vmax: (n)
  const bool amsgrad = vmax != nullptr, decoupled = step.decoupled;
  const T b1 = static_cast<T>(step.beta1), b2 = static_cast<T>(step.beta2);
  const T eps = static_cast<T>(step.eps), wd = static_cast<T>(step.weight_decay);
  const T decay = static_cast<T>(step.decay);
  const T bc2 = static_cast<T>(step.bias2_sqrt), lr_t = static_cast<T>(step.step_size);
  const T one_b1 = T(1) - b1, one_b2 = T(1) - b2;
  auto apply = [&](auto pk, auto gk, auto mk, auto vk, auto* vmaxk) {
    using V = decltype(pk);
    auto d = gk;
    if (decoupled) {
      pk = pk * V(decay);
    } else if (wd != T(0)) {
      d = d + V(wd) * pk;
    }
    mk = V(b1) * mk + V(one_b1) * d;
    vk = V(b2) * vk + V(one_b2) * d * d;
    auto second = vk;
    if (vmaxk != nullptr) {
      *vmaxk = xsimd::max(*vmaxk, vk);
      second = *vmaxk;
    }
    pk = pk - V(lr_t) * mk / (xsimd::sqrt(second) / V(bc2) + V(eps));
    return std::make_tuple(pk, mk, vk);
  };
  using B = xsimd::batch<T>;
  constexpr std::int64_t lanes = static_cast<std::int64_t>(B::size);
  // Whole batches go over the thread pool, the tail stays here: which elements take the vector
  // body does not depend on the thread count, so neither do the bits.
  const std::int64_t batches = n / lanes;
  parallel_for(0, batches, kElementwiseGrain / lanes, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t k = first * lanes; k < last * lanes; k += lanes) {
      B vm = amsgrad ? B::load_unaligned(vmax + k) : B(T(0));
      auto [pk, mk, vk] = apply(B::load_unaligned(param + k), B::load_unaligned(grad + k), B::load_unaligned(m + k),
                                B::load_unaligned(v + k), amsgrad ? &vm : static_cast<B*>(nullptr));
      pk.store_unaligned(param + k);
      mk.store_unaligned(m + k);
      vk.store_unaligned(v + k);
      if (amsgrad) vm.store_unaligned(vmax + k);
    }
  });
  for (std::int64_t k = batches * lanes; k < n; ++k) {
    auto [pk, mk, vk] = apply(param[k], grad[k], m[k], v[k], amsgrad ? vmax + k : nullptr);
    param[k] = pk;
    m[k] = mk;
    v[k] = vk;
  }
}

template void adam_update<float>(float*, const float*, float*, float*, float*, std::int64_t, const AdamStep&);
template void adam_update<double>(double*, const double*, double*, double*, double*, std::int64_t, const AdamStep&);

namespace {

// fn(k) for every k < nnz, the gradient rows of a row-sparse step (each dim elements long) split
// over the pool in chunks of about kElementwiseGrain elements.
template <class F>
void for_each_row(std::int64_t nnz, std::int64_t dim, F fn) {
  const std::int64_t grain = std::max<std::int64_t>(1, kElementwiseGrain / std::max<std::int64_t>(dim, 1));
  parallel_for(0, nnz, grain, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t k = first; k < last; ++k) fn(k);
  });
}

}  // namespace

template <class T>
void sparse_adam_rows(T* param, T* m, T* v, const std::int64_t* rows, const T* values, std::int64_t nnz,
                      std::int64_t dim, const SparseAdamStep& step) {
  // param, m, v: (., dim); rows: (nnz); values: (nnz, dim)
  const T one_b1 = static_cast<T>(1.0 - step.beta1), one_b2 = static_cast<T>(1.0 - step.beta2);
  const T eps = static_cast<T>(step.eps), minus_step = static_cast<T>(-step.step_size);
  auto apply = [&](auto pk, auto gk, auto mk, auto vk) {
    using V = decltype(pk);
    mk = mk + (gk - mk) * V(one_b1);
    vk = vk + (gk * gk - vk) * V(one_b2);
    pk = pk + V(minus_step) * (mk / (xsimd::sqrt(vk) + V(eps)));
    return std::make_tuple(pk, mk, vk);
  };
  using B = xsimd::batch<T>;
  constexpr std::int64_t lanes = static_cast<std::int64_t>(B::size);
  const std::int64_t body = dim / lanes * lanes;
  for_each_row(nnz, dim, [&](std::int64_t k) {
    T* p = param + rows[k] * dim;
    T* mr = m + rows[k] * dim;
    T* vr = v + rows[k] * dim;
    const T* g = values + k * dim;
    for (std::int64_t j = 0; j < body; j += lanes) {
      auto [pk, mk, vk] = apply(B::load_unaligned(p + j), B::load_unaligned(g + j), B::load_unaligned(mr + j),
                                B::load_unaligned(vr + j));
      pk.store_unaligned(p + j);
      mk.store_unaligned(mr + j);
      vk.store_unaligned(vr + j);
    }
    for (std::int64_t j = body; j < dim; ++j) std::tie(p[j], mr[j], vr[j]) = apply(p[j], g[j], mr[j], vr[j]);
  });
}

template void sparse_adam_rows<float>(float*, float*, float*, const std::int64_t*, const float*, std::int64_t,
                                      std::int64_t, const SparseAdamStep&);
template void sparse_adam_rows<double>(double*, double*, double*, const std::int64_t*, const double*, std::int64_t,
                                       std::int64_t, const SparseAdamStep&);

namespace {

// One Adagrad element (a scalar or an xsimd batch, so body and tail compute alike): torch's addcmul_ then addcdiv_ with
// value -lr.
template <class V, class T>
void adagrad_element(V& p, V d, V& sum, T minus_lr, T eps) {
  sum = sum + d * d;
  p = p + V(minus_lr) * (d / (xsimd::sqrt(sum) + V(eps)));
}

}  // namespace

template <class T>
void adagrad_update(T* param, const T* grad, T* sum, std::int64_t n, const AdagradStep& step) {
  // param, grad, sum: (n)
  const T minus_lr = static_cast<T>(-step.lr), wd = static_cast<T>(step.weight_decay), eps = static_cast<T>(step.eps);
  using B = xsimd::batch<T>;
  constexpr std::int64_t lanes = static_cast<std::int64_t>(B::size);
  parallel_for_blocks(n, kElementwiseGrain, [&](std::int64_t lo, std::int64_t hi) {
    std::int64_t k = lo;
    for (; k + lanes <= hi; k += lanes) {
      B p = B::load_unaligned(param + k), s = B::load_unaligned(sum + k);
      B d = B::load_unaligned(grad + k);
      if (wd != T(0)) d = d + B(wd) * p;
      adagrad_element(p, d, s, minus_lr, eps);
      p.store_unaligned(param + k);
      s.store_unaligned(sum + k);
    }
    for (; k < hi; ++k) {
      T d = grad[k];
      if (wd != T(0)) d = d + wd * param[k];
      adagrad_element(param[k], d, sum[k], minus_lr, eps);
    }
  });
}

template <class T>
void adagrad_rows(T* param, T* sum, const std::int64_t* rows, const T* values, std::int64_t nnz, std::int64_t dim,
                  const AdagradStep& step) {
  // param, sum: (., dim); rows: (nnz); values: (nnz, dim)
  const T minus_lr = static_cast<T>(-step.lr), eps = static_cast<T>(step.eps);
  using B = xsimd::batch<T>;
  constexpr std::int64_t lanes = static_cast<std::int64_t>(B::size);
  const std::int64_t body = dim / lanes * lanes;
  for_each_row(nnz, dim, [&](std::int64_t k) {
    T* p = param + rows[k] * dim;
    T* s = sum + rows[k] * dim;
    const T* g = values + k * dim;
    for (std::int64_t j = 0; j < body; j += lanes) {
      B pj = B::load_unaligned(p + j), sj = B::load_unaligned(s + j);
      adagrad_element(pj, B::load_unaligned(g + j), sj, minus_lr, eps);
      pj.store_unaligned(p + j);
      sj.store_unaligned(s + j);
    }
    for (std::int64_t j = body; j < dim; ++j) adagrad_element(p[j], g[j], s[j], minus_lr, eps);
  });
}

template void adagrad_update<float>(float*, const float*, float*, std::int64_t, const AdagradStep&);
template void adagrad_update<double>(double*, const double*, double*, std::int64_t, const AdagradStep&);
template void adagrad_rows<float>(float*, float*, const std::int64_t*, const float*, std::int64_t, std::int64_t,
                                  const AdagradStep&);
template void adagrad_rows<double>(double*, double*, const std::int64_t*, const double*, std::int64_t, std::int64_t,
                                   const AdagradStep&);

template <class T>
void rmsprop_update(T* param, const T* grad, T* square_avg, T* grad_avg, T* buf, std::int64_t n,
                    const RmspropStep& step) {
  // param, grad, square_avg, grad_avg, buf: (n); grad_avg and buf may be null
  const bool centered = grad_avg != nullptr, use_momentum = buf != nullptr;
  const T alpha = static_cast<T>(step.alpha), one_alpha = static_cast<T>(1.0 - step.alpha);
  const T eps = static_cast<T>(step.eps), wd = static_cast<T>(step.weight_decay);
  const T momentum = static_cast<T>(step.momentum), minus_lr = static_cast<T>(-step.lr);
  // One element, or one xsimd batch, in the order of torch's CPU kernels: addcmul_ and addcdiv_ compute
  // self + (value * t1) * t2 and self + (value * t1) / t2.
  auto apply = [&](auto& pk, auto d, auto& sk, auto* gak, auto* bk) {
    using V = std::decay_t<decltype(pk)>;
    if (wd != T(0)) d = d + V(wd) * pk;
    sk = V(alpha) * sk + V(one_alpha) * d * d;
    V avg = sk;
    if (gak != nullptr) {
      *gak = V(alpha) * *gak + V(one_alpha) * d;
      avg = sk - *gak * *gak;
    }
    avg = xsimd::sqrt(avg) + V(eps);
    if (bk != nullptr) {
      *bk = V(momentum) * *bk + d / avg;
      pk = pk + V(minus_lr) * *bk;
    } else {
      pk = pk + V(minus_lr) * d / avg;
    }
  };
  using B = xsimd::batch<T>;
  constexpr std::int64_t lanes = static_cast<std::int64_t>(B::size);
  // Whole batches over the pool, the tail here, as adam_update: the bits do not depend on the thread count.
  const std::int64_t batches = n / lanes;
  parallel_for(0, batches, kElementwiseGrain / lanes, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t k = first * lanes; k < last * lanes; k += lanes) {
      B pk = B::load_unaligned(param + k), sk = B::load_unaligned(square_avg + k);
      B gak = centered ? B::load_unaligned(grad_avg + k) : B(T(0));
      B bk = use_momentum ? B::load_unaligned(buf + k) : B(T(0));
      apply(pk, B::load_unaligned(grad + k), sk, centered ? &gak : nullptr, use_momentum ? &bk : nullptr);
      pk.store_unaligned(param + k);
      sk.store_unaligned(square_avg + k);
      if (centered) gak.store_unaligned(grad_avg + k);
      if (use_momentum) bk.store_unaligned(buf + k);
    }
  });
  for (std::int64_t k = batches * lanes; k < n; ++k)
    apply(param[k], grad[k], square_avg[k], centered ? grad_avg + k : nullptr, use_momentum ? buf + k : nullptr);
}

template void rmsprop_update<float>(float*, const float*, float*, float*, float*, std::int64_t, const RmspropStep&);
template void rmsprop_update<double>(double*, const double*, double*, double*, double*, std::int64_t,
                                     const RmspropStep&);

}  // namespace tapegrad::kernels
