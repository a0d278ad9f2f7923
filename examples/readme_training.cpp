// The training script shown in README.md, verbatim between the BEGIN/END markers below. It is
// built and run as a CTest (example.readme_training), which fails if it does not learn; another
// test fails if the README's copy differs from this one.

// BEGIN README EXAMPLE
#include <iostream>

#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tapegrad/train/train.h"

using namespace tapegrad;

int main(int argc, char** argv) {
  manual_seed(0);                           // the default generator: data and weights
  Tensor x = uniform({512, 1}, -3.0, 3.0);  // 512 points in [-3, 3]
  Tensor y = exp(neg(x * x));               // the curve to fit: a bump
  nn::Sequential model(nn::Linear(1, 64), nn::GELU(), nn::Linear(64, 1));
  optim::AdamW optimizer(model->parameters(), optim::AdamWOptions(/*lr=*/1e-2).weight_decay(0));
  optim::Scheduler scheduler(optimizer, optim::cosine_with_warmup(/*warmup=*/50, /*total=*/1500));
  train::TrainerOptions options;
  options.max_steps = 1500;
  options.log_every = 100;
  options.run_dir = argc > 1 ? argv[1] : "runs/readme";  // metrics.jsonl, checkpoint/ (resumed)
  train::Trainer trainer(model, optimizer, options);
  trainer.set_scheduler(&scheduler);
  train::TrainResult result = trainer.fit([&](std::int64_t /*step*/) {
    return train::StepOutput{nn::mse_loss(model(x), y), /*examples=*/512};
  });
  std::cout << "final loss " << result.final_loss << " after " << result.steps << " steps\n";
  return result.final_loss < 1e-3 ? 0 : 1;
}
// END README EXAMPLE
