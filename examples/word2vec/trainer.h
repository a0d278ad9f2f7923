#pragma once
// word2vec training on tapegrad's tape, as a function other programs call: the word2vec program
// trains on the Bible with it, and the spam classifier pretrains its word embeddings with it on
// its training emails.
//
//   models   skip-gram (the center word's input vector predicts each context word) or CBOW (the
//            mean of the context's input vectors predicts the center word)
//   losses   negative sampling (`negative` noise words per example from count^0.75, an AliasTable)
//            or hierarchical softmax over a Huffman tree of the counts (nn::huffman_tree)
//   training the sentences are cut into `shards` contiguous runs (default 2), each read in order
//            by its own worker with its own generator. A step takes the next batch of examples of
//            every shard (default 256 each, 64 for CBOW with hierarchical softmax), computes each shard's
//            gradients from the same weights, the shards in parallel on the thread pool (each on its
//            own tape, through leaves that share the tables' storage), and applies all of them in one
//            SGD step; the next batches, which read no weights (sentences subsampled, windows and
//            noise words drawn, Huffman paths looked up), are made meanwhile on the pool's second
//            thread (after the step on one thread; with more than two, the step is split among them
//            and the batches are made after it, in parallel).
//            Both tables are Embeddings with row-sparse gradients, stepped at word2vec.c's learning
//            rate (0.025 skip-gram, 0.05 CBOW), decayed linearly to 1e-4 of it over the words of all
//            epochs. The vectors depend on the shards, not on the thread count. A step's gradients
//            are summed, computed before any of its updates, so the nodes near the
//            root of the Huffman tree, on nearly every path, take a step's updates at once: on the
//            Bible, skip-gram diverged with 1024 examples a shard and trained with 512, CBOW diverged
//            with 256. Since they repeat so, a shard's gradient of the nodes' table has one row per
//            distinct node (embedding_dot's sum_repeated; 16% of the path positions of a skip-gram
//            batch of 64 pairs are distinct), so the step updates each once per shard
//   processes under mpirun (a DataParallel of several), the shards are divided among the processes
//            in order; each computes its own shards' gradients, and the rows of every shard's
//            gradients are gathered on every process before the SGD step, which then applies them
//            in shard order as one process does: the vectors equal one process's with the same
//            shards (bit for bit on the same CPU), and `shards` must be a multiple of the processes
//   subwords with maxn > 0, fastText's model (Bojanowski et al. 2017): the input table gains
//            `buckets` rows for character n-grams (data::Subwords, minn to maxn characters), and
//            a word's input vector is the mean of its own row and its n-grams' rows, taken by
//            nn::embedding_bag with a row-sparse gradient; CBOW averages the rows of all its context
//            words' n-grams. Every row of the mean receives the mean's whole gradient, as fastText
//            updates them. A word's vector is that mean; a word outside the vocabulary has the
//            mean of its n-grams' rows (ngram_vectors)
//
//   Vocabulary vocab = build_vocabulary(sentences, 5);
//   Word2VecResult r = train_word2vec(vocab.encode(sentences), vocab, Word2VecOptions());
//   r.vectors   // (vocab.size(), dim), row i the vector of vocab.words[i]

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "examples/common/data_parallel.h"
#include "examples/word2vec/corpus.h"
#include "tapegrad/data/subwords.h"

namespace tapegrad::examples::word2vec {

struct Word2VecOptions {
  std::string model = "skipgram";  // "skipgram" or "cbow"
  std::string loss = "ns";         // "ns" (negative sampling) or "hs" (hierarchical softmax)
  std::int64_t dim = 100;
  std::int64_t window = 5;    // largest window radius; each center draws one in [1, window]
  std::int64_t negative = 5;  // noise words per example (ns)
  double sample = 1e-3;       // subsampling threshold t (0: keep every word)
  std::int64_t epochs = 5;
  double lr = 0.0;                 // 0: 0.025 for skip-gram, 0.05 for CBOW
  std::int64_t batch_size = 0;     // examples per shard per step (0: 256, or 64 for CBOW with hs)
  std::int64_t shards = 2;         // workers computing their batches' gradients at once (see above)
  std::uint64_t seed = 0;          // initial vectors, subsampling, windows and noise words
  std::int64_t minn = 3;           // subwords: shortest character n-gram (used when maxn > 0)
  std::int64_t maxn = 0;           // subwords: longest character n-gram (0: no subwords, word2vec)
  std::int64_t buckets = 2000000;  // subwords: hash buckets of the n-grams, fastText's default

  bool subwords() const { return maxn > 0; }
  data::SubwordOptions subword_options() const { return data::SubwordOptions().minn(minn).maxn(maxn).buckets(buckets); }

  double start_lr() const { return lr > 0.0 ? lr : (model == "cbow" ? 0.05 : 0.025); }
  std::int64_t batch() const { return batch_size > 0 ? batch_size : (loss == "hs" && model == "cbow" ? 64 : 256); }
};

// A report every log_every steps: the mean loss per example since the previous one.
struct Word2VecLog {
  std::int64_t step = 0, words = 0;
  double lr = 0, loss = 0, seconds = 0, words_per_second = 0;
};

struct Word2VecResult {
  Tensor vectors;     // (vocab.size(), dim): the input vectors
  Tensor ngram_rows;  // subwords: (buckets, dim), the n-grams' rows of the input table; else undefined
  std::int64_t steps = 0, words = 0;
  double seconds = 0, words_per_second = 0;
  std::vector<double> epoch_losses;  // mean loss per example of each epoch
};

struct Word2VecCallbacks {
  std::int64_t log_every = 0;  // 0: no on_log calls
  std::function<void(const Word2VecLog&)> on_log;
  std::function<void(std::int64_t epoch, double loss, double words_per_second)> on_epoch;  // epoch from 1
};

// Trains on `sentences` (ids of `vocab`, as Vocabulary::encode gives them), on the processes of
// `parallel` (see above; every process passes the same sentences and options). ValueError naming
// the option for a model or loss not listed above, a dim, window, negative, epochs or shards below
// 1, shards not a multiple of the processes, a negative sample, lr or batch_size, or (with subwords)
// minn, maxn and buckets that data::Subwords refuses.
Word2VecResult train_word2vec(const std::vector<std::vector<std::int64_t>>& sentences, const Vocabulary& vocab,
                              const Word2VecOptions& options, const Word2VecCallbacks& callbacks = {},
                              const DataParallel& parallel = DataParallel());

// The vectors of `words` from their n-grams alone, as fastText gives a word outside its vocabulary:
// row i the mean of the rows of words[i]'s n-gram buckets (zeros for a word without n-grams), for
// a model trained with subwords (result.ngram_rows) and the same minn, maxn and buckets.
// ValueError when ngram_rows is undefined or does not have subwords' bucket count of rows.
Tensor ngram_vectors(const Tensor& ngram_rows, const data::Subwords& subwords, const std::vector<std::string>& words);

}  // namespace tapegrad::examples::word2vec
