// dense(): the contiguous copy the kernels that need one start from.

#include "tapegrad/autograd/kernels/elementwise.h"

namespace tapegrad::kernels {

Tensor dense(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor out = empty(x.shape(), x.dtype());
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    copy_strided(x.data_ptr<T>(), x.strides(), out.data_ptr<T>(), out.strides(), x.shape());
  });
  return out;
}

}  // namespace tapegrad::kernels
