// Uses the installed tapegrad: one small backward with a gradient known in closed form, and a
// module used through its handle (nn::Linear with chainable options). Exits 0 when both are right.
#include <cmath>
#include <cstdio>

#include <tapegrad/tapegrad.h>  // the umbrella header: every layer, as installed

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

  // A Linear without bias whose weight is set to (1, 2): fc([[3, 4]]) = 3 + 8 = 11.
  manual_seed(0);
  nn::Linear fc{nn::LinearOptions(2, 1).bias(false)};
  {
    NoGradGuard no_grad;
    fc->weight().copy_(tensor({{1, 2}}));
  }
  const double out = fc(tensor({{3, 4}})).item();
  const bool module_ok = std::abs(out - 11.0) < 1e-6 && !fc->bias().defined();
  std::printf("consumer: nn::Linear handle gives %g: %s\n", out, module_ok ? "ok" : "WRONG");
  return wrong == 0 && module_ok ? 0 : 1;
}
