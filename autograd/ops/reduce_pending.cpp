// PLACEHOLDER: replaced by the real implementation before commit.
#include "autograd/ops.h"
namespace tapegrad {
Tensor max(const Tensor&, const Dims&, bool) { throw Error("not implemented yet"); }
Tensor min(const Tensor&, const Dims&, bool) { throw Error("not implemented yet"); }
Tensor var(const Tensor&, const Dims&, std::int64_t, bool) { throw Error("not implemented yet"); }
Tensor argmax(const Tensor&, std::int64_t, bool) { throw Error("not implemented yet"); }
Tensor argmin(const Tensor&, std::int64_t, bool) { throw Error("not implemented yet"); }
Tensor logsumexp(const Tensor&, const Dims&, bool) { throw Error("not implemented yet"); }
Tensor softmax(const Tensor&, std::int64_t) { throw Error("not implemented yet"); }
Tensor log_softmax(const Tensor&, std::int64_t) { throw Error("not implemented yet"); }
}
