// PLACEHOLDER: replaced by the real implementation before commit.
#include "autograd/ops.h"
namespace tapegrad {
Tensor index_select(const Tensor&, std::int64_t, const Tensor&) { throw Error("not implemented yet"); }
Tensor gather(const Tensor&, std::int64_t, const Tensor&) { throw Error("not implemented yet"); }
Tensor scatter_add(const Tensor&, std::int64_t, const Tensor&, const Tensor&) { throw Error("not implemented yet"); }
Tensor embedding(const Tensor&, const Tensor&, std::optional<std::int64_t>) { throw Error("not implemented yet"); }
std::pair<Tensor, Tensor> topk(const Tensor&, std::int64_t, std::int64_t, bool, bool) { throw Error("not implemented yet"); }
Tensor one_hot(const Tensor&, std::int64_t, DType) { throw Error("not implemented yet"); }
}
