#include <doctest/doctest.h>

#include "autograd/ops.h"

using namespace tapegrad;

TEST_CASE("smoke") {
  Tensor a = tensor({{1, 2}, {3, 4}}).requires_grad_();
  Tensor y = (a * a + a).sum();
  y.backward();
  CHECK(y.item() == doctest::Approx(40));
  CHECK(a.grad().at({1, 1}) == doctest::Approx(9));
}
