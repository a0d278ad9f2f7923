#pragma once
// GloVe (Pennington, Socher and Manning 2014) on tapegrad's tape: word vectors fitted by weighted
// least squares to the logarithms of windowed co-occurrence counts.
//
//   counts   X[i][j] = the sum, over every occurrence of word j within `window` words of an
//            occurrence of word i in one sentence, of 1 / distance; symmetric (both orders counted)
//   model    vectors w (V, d) and context vectors c (V, d), biases b and b~ (V), all drawn uniform
//            in [-0.5, 0.5] / d as glove.c draws them
//   loss     over the nonzero counts: 1/2 f(X_ij) (w_i . c_j + b_i + b~_j - log X_ij)^2 with
//            f(x) = min(1, (x / x_max)^alpha), summed over a batch of pairs; the pairs reshuffled
//            every epoch
//   steps    optim::Adagrad (sum of squared gradients starting at 1, as glove.c's) on row-sparse
//            gradients: a step changes only the rows of its batch's words
//   vectors  w + c, glove.c's default output
//   processes under mpirun (a DataParallel of several), each process fits its part of every batch
//            (the pairs divided in order) and the rows of the parts' gradients are gathered on every
//            process before the step: the vectors equal one process's (bit for bit on the same CPU)
//
//   Cooccurrences x = count_cooccurrences(vocab.encode(sentences), vocab.size(), 10);
//   Word2VecResult r = train_glove(x, vocab.size(), GloveOptions());

#include <cstdint>
#include <vector>

#include "examples/word2vec/trainer.h"

namespace tapegrad::examples::word2vec {

// The nonzero entries of X, ordered by (row, col).
struct Cooccurrences {
  std::vector<std::int64_t> rows, cols;
  std::vector<double> counts;
  std::int64_t size() const { return static_cast<std::int64_t>(counts.size()); }
};

// ValueError for a window below 1 or an id outside [0, vocab_size).
Cooccurrences count_cooccurrences(const std::vector<std::vector<std::int64_t>>& sentences, std::int64_t vocab_size,
                                  std::int64_t window);

struct GloveOptions {
  std::int64_t dim = 100;
  double x_max = 100.0;  // counts above it weigh 1
  double alpha = 0.75;   // f's exponent below x_max
  double lr = 0.05;      // Adagrad's
  std::int64_t epochs = 25;
  std::int64_t batch_size = 4096;  // pairs per step
  std::uint64_t seed = 0;          // initial vectors and the order of the pairs
};

// Word2VecResult's words count the co-occurrence pairs fitted (epochs x x.size()) and its
// epoch_losses the mean loss per pair of each epoch. ValueError naming the option for a dim,
// epochs or batch_size below 1 or an x_max, alpha or lr not above 0, or an empty x.
Word2VecResult train_glove(const Cooccurrences& x, std::int64_t vocab_size, const GloveOptions& options,
                           const Word2VecCallbacks& callbacks = {}, const DataParallel& parallel = DataParallel());

}  // namespace tapegrad::examples::word2vec
