// xor_mlp: a 2-8-1 multilayer perceptron learns XOR by full-batch gradient descent, written
// directly against the autograd API (no nn or optim modules): the parameters are leaf tensors
// that require grad, the loss is built from ops, loss.backward() fills their gradients, and the
// update p -= lr * grad runs under NoGradGuard so it is not recorded.
//
//   h      = tanh(x W1 + b1)            x: (4, 2), W1: (2, 8), b1: (8), h: (4, 8)
//   z      = h W2 + b2                  W2: (8, 1), b2: (1), z: (4, 1) logits
//   loss   = mean(max(z, 0) - z y + log(1 + exp(-|z|)))
//
// The loss is binary cross-entropy on the logits, in the form that never takes the log of a
// number that rounds to 0. The program prints the loss as it trains and the final predictions,
// and exits with status 1 if it did not learn (final loss above 0.01 or a wrong prediction), so
// CTest can run it as a test.
//
// Usage: xor_mlp [steps] [seed]      (defaults 2000 and 42)

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;

int train(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 2000;
  const std::uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 42;
  const double learning_rate = 0.5;
  const int hidden = 8;
  const double loss_threshold = 0.01;

  // The four XOR cases and their labels.
  const Tensor x = tensor({{0, 0}, {0, 1}, {1, 0}, {1, 1}});  // x: (4, 2)
  const Tensor y = tensor({{0}, {1}, {1}, {0}});              // y: (4, 1)

  // Parameters: uniform in [-1, 1) from a seeded generator, so every run is the same.
  Generator gen(seed);
  const Tensor w1 = uniform({2, hidden}, -1.0, 1.0, gen).requires_grad_();  // (2, 8)
  const Tensor b1 = zeros({hidden}).requires_grad_();                       // (8)
  const Tensor w2 = uniform({hidden, 1}, -1.0, 1.0, gen).requires_grad_();  // (8, 1)
  const Tensor b2 = zeros({1}).requires_grad_();                            // (1)
  const std::vector<Tensor> parameters = {w1, b1, w2, b2};

  auto forward = [&](const Tensor& input) {
    const Tensor h = tanh(matmul(input, w1) + b1);  // (4, 8)
    return matmul(h, w2) + b2;                      // (4, 1) logits
  };

  double loss_value = 0.0;
  for (int step = 1; step <= steps; ++step) {
    const Tensor z = forward(x);
    const Tensor loss = mean(relu(z) - z * y + log(1.0 + exp(-abs(z))));
    loss.backward();
    loss_value = loss.item();

    {
      NoGradGuard no_grad;
      for (const Tensor& p : parameters) {
        p.add_(p.grad(), -learning_rate);
        p.zero_grad();
      }
    }
    if (step == 1 || step % 200 == 0 || step == steps) std::printf("step %5d  loss %.6f\n", step, loss_value);
  }

  // Predictions, without recording a graph.
  NoGradGuard no_grad;
  const Tensor probability = sigmoid(forward(x));  // (4, 1)
  int wrong = 0;
  std::printf("\n x1 x2 | target | p(1)\n");
  for (int i = 0; i < 4; ++i) {
    const double p = probability.at({i, 0});
    const double target = y.at({i, 0});
    if ((p > 0.5) != (target > 0.5)) ++wrong;
    std::printf("  %.0f  %.0f |   %.0f    | %.4f\n", x.at({i, 0}), x.at({i, 1}), target, p);
  }

  const bool learned = loss_value <= loss_threshold && wrong == 0;
  std::printf("\nfinal loss %.6f (threshold %.2f), %d of 4 wrong: %s\n", loss_value, loss_threshold, wrong,
              learned ? "learned XOR" : "DID NOT LEARN XOR");
  return learned ? 0 : 1;
}

int main(int argc, char** argv) {
  try {
    return train(argc, argv);
  } catch (const Error& e) {  // tapegrad's typed errors carry the op and the shapes
    std::fprintf(stderr, "xor_mlp: %s\n", e.what());
    return 1;
  }
}
