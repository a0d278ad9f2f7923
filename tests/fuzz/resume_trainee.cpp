// The training program kill9_resume kills: a small MLP with dropout, AdamW with a cosine schedule, batches
// from a tracked generator and gradient clipping, checkpointing every few steps into RUN_DIR and resuming
// from it, so that a run killed at any moment and restarted ends as an uninterrupted one.
//
//   resume_trainee RUN_DIR [STEPS [CHECKPOINT_EVERY]]     (defaults: 300 steps, a checkpoint every 2)

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>

#include "tapegrad/autograd/error.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optim.h"
#include "tapegrad/train/train.h"

using namespace tapegrad;

namespace {

std::int64_t positive_argument(const char* text, const char* what) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v <= 0)
    throw ValueError(std::string("resume_trainee: ") + what + " must be a positive integer, got \"" + text + "\"");
  return v;
}

// y = sum(x^2) / d + the first feature: what the model learns from x: (B, d).
Tensor target(const Tensor& x) { return (x * x).mean({1}, true) + x.narrow(1, 0, 1); }

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2 || argc > 4) {
      std::cerr << "usage: resume_trainee RUN_DIR [STEPS [CHECKPOINT_EVERY]]\n";
      return 2;
    }
    const std::int64_t steps = argc > 2 ? positive_argument(argv[2], "STEPS") : 300;
    const std::int64_t checkpoint_every = argc > 3 ? positive_argument(argv[3], "CHECKPOINT_EVERY") : 2;

    Generator init(11);  // weights and the dropout seed
    Generator data(12);  // the batches: tracked, so a resume continues its stream
    nn::Sequential model(nn::Linear(nn::LinearOptions(8, 32).generator(&init)), nn::GELU(),
                         nn::Dropout(nn::DropoutOptions(0.1).generator(&init)),
                         nn::Linear(nn::LinearOptions(32, 1).generator(&init)));
    optim::AdamW optimizer(model->parameters(), optim::AdamWOptions(3e-3));
    optim::Scheduler scheduler(optimizer, optim::cosine_with_warmup(/*warmup=*/20, steps, 0.1));

    train::TrainerOptions options;
    options.max_steps = steps;
    options.log_every = 1;
    options.eval_every = 25;
    options.checkpoint_every = checkpoint_every;
    options.clip_grad_norm = 1.0;
    options.run_dir = argv[1];
    options.progress = train::Progress::Off;
    train::Trainer trainer(model, optimizer, options);
    trainer.set_scheduler(&scheduler);
    trainer.track_generator("data", data);

    const train::TrainResult result = trainer.fit(
        [&](std::int64_t /*step*/) {
          Tensor x = randn({32, 8}, data);  // x: (32, 8)
          return train::StepOutput{nn::mse_loss(model(x), target(x)), 32};
        },
        [&](std::int64_t /*step*/) {
          Generator held_out(99);  // the same batch at every evaluation; never the tracked generator
          Tensor x = randn({64, 8}, held_out);
          return std::map<std::string, double>{{"val_loss", nn::mse_loss(model(x), target(x)).item()}};
        });
    std::cout << "resume_trainee: " << result.steps << " steps (resumed from " << result.resumed_from
              << "), final loss " << result.final_loss << "\n";
    return std::isfinite(result.final_loss) ? 0 : 1;
  } catch (const Error& e) {
    std::cerr << "resume_trainee: " << e.what() << "\n";
    return 1;
  }
}
