// Uses the installed tapegrad: one small backward with a gradient known in closed form.
// Exits 0 when the gradient is right.
#include <cmath>
#include <cstdio>

#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;

int main() {
  // y = sum(x * x + 3 x) => dy/dx = 2 x + 3
  const Tensor x = tensor({{1, -2}, {0.5, 4}}).requires_grad_();  // x: (2, 2)
  const Tensor y = (x * x + x * 3.0).sum();
  y.backward();

  const double expected[2][2] = {{5, -1}, {4, 11}};
  int wrong = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      if (std::abs(x.grad().at({i, j}) - expected[i][j]) > 1e-6) ++wrong;
  // y = (1 + 3) + (4 - 6) + (0.25 + 1.5) + (16 + 12) = 31.75
  if (std::abs(y.item() - 31.75) > 1e-5) ++wrong;
  std::printf("consumer: y = %g, dy/dx = [[%g, %g], [%g, %g]]: %s\n", y.item(), x.grad().at({0, 0}),
              x.grad().at({0, 1}), x.grad().at({1, 0}), x.grad().at({1, 1}), wrong == 0 ? "ok" : "WRONG");
  return wrong == 0 ? 0 : 1;
}
