// The README's training script (examples/readme_training.cpp) written with libtorch's C++ API, for the
// compile-time benchmark (bench/compile_time.sh): the same model, data, optimiser, schedule, logging
// and checkpoint-per-run-directory behaviour a user would write, so both compilers see a program of the
// same size. libtorch has no trainer: the loop, the warm-up/cosine schedule and the log are spelled out.
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  torch::manual_seed(0);
  torch::Tensor x = torch::rand({512, 1}) * 6.0 - 3.0;  // 512 points in [-3, 3]
  torch::Tensor y = torch::exp(-(x * x));               // the curve to fit: a bump
  torch::nn::Sequential model(torch::nn::Linear(1, 64), torch::nn::GELU(), torch::nn::Linear(64, 1));
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-2).weight_decay(0));
  const std::string run_dir = argc > 1 ? argv[1] : "runs/readme";
  std::filesystem::create_directories(run_dir);
  std::ofstream metrics(run_dir + "/metrics.jsonl");
  const int steps = 1500, warmup = 50;
  double loss_value = 0.0;
  for (int step = 0; step < steps; ++step) {
    const double lr = step < warmup ? 1e-2 * (step + 1) / warmup
                                    : 1e-2 * 0.5 * (1.0 + std::cos(M_PI * (step - warmup) / (steps - warmup)));
    for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    optimizer.zero_grad();
    torch::Tensor loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
    loss_value = loss.item<double>();
    if ((step + 1) % 100 == 0) metrics << "{\"step\": " << step + 1 << ", \"loss\": " << loss_value << "}\n";
  }
  torch::save(model, run_dir + "/model.pt");
  std::cout << "final loss " << loss_value << " after " << steps << " steps\n";
  return loss_value < 1e-3 ? 0 : 1;
}
