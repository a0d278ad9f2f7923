// Uses the installed tapegrad: one small backward with a gradient known in closed form, and a
// module used through its handle (nn::Linear with chainable options), also under bfloat16 autocast.
// Exits 0 when all are right.
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

  // The same Linear under bfloat16 autocast (built with plain flags, on any x86-64 CPU): 3, 4, 1 and 2
  // are exact in bfloat16, so the product is 11 in bfloat16; the gradient reaches the float32 weight.
  Tensor y16;
  {
    AutocastGuard autocast(kBFloat16);
    y16 = fc(tensor({{3, 4}}));
  }
  y16.sum().backward();
  const bool bf16_ok = y16.dtype() == kBFloat16 && y16.item() == 11.0 && fc->weight().grad().dtype() == kFloat32 &&
                       fc->weight().grad().at({0, 1}) == 4.0;
  std::printf("consumer: under bfloat16 autocast %g (%s): %s\n", y16.item(), dtype_name(y16.dtype()),
              bf16_ok ? "ok" : "WRONG");
  return wrong == 0 && module_ok && bf16_ok ? 0 : 1;
}
