#include "tapegrad/nn/decoding.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/ops.h"

namespace tapegrad::nn {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// One live hypothesis: a decoder row's generated tokens and summed log-probability.
struct Beam {
  std::vector<std::int64_t> tokens;
  double log_prob = kNegInf;
  std::vector<double> coverage;  // attention summed over the steps, per source position (coverage penalty)
};

// GNMT's coverage penalty beta * sum_j log(min(coverage_j, 1)) over the positions j that are not
// padding (padding: the row's S flags, or empty for none).
double coverage_penalty(const std::vector<double>& coverage, const std::vector<std::int64_t>& padding, double beta) {
  double total = 0.0;
  for (std::size_t j = 0; j < coverage.size(); ++j)
    if (padding.empty() || padding[j] == 0) total += std::log(std::min(coverage[j], 1.0));
  return beta * total;
}

}  // namespace

Tensor LanguageModelDecoder::start(const Tensor& prompt) {
  cache_ = LanguageModelCache();
  model_->eval();
  return model_->forward(prompt, &cache_).select(1, -1);
}

Tensor LanguageModelDecoder::step(const Tensor& tokens) { return model_->forward(tokens, &cache_).select(1, -1); }

namespace detail {

Tensor source_rows(const char* decoder, std::int64_t rows, std::int64_t sources) {
  if (sources < 1 || rows % sources != 0)
    throw ShapeError(std::string(decoder) + ": " + std::to_string(rows) + " prompt rows for " +
                     std::to_string(sources) +
                     " sources; the rows must be the sources repeated an equal number of times");
  const std::int64_t per = rows / sources;
  std::vector<std::int64_t> index(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) index[static_cast<std::size_t>(r)] = r / per;
  return from_vector(index, {rows});
}

}  // namespace detail

Tensor EncoderDecoderDecoder::start(const Tensor& prompt) {
  NoGradGuard no_grad;
  model_->eval();
  const Tensor rows = detail::source_rows("EncoderDecoderDecoder", prompt.shape()[0], source_.shape()[0]);
  memory_ = index_select(model_->encode(source_, padding_), 0, rows);
  row_padding_ = padding_.defined() ? index_select(padding_, 0, rows) : Tensor();
  cache_ = DecoderCache();
  if (target_length_ > 0 && model_->options().randomized_positions() > 0) {
    // One draw per source, shared by its beams (the rows repeat the sources).
    cache_.positions = index_select(model_->sample_positions(source_.shape()[0], target_length_), 0, rows);
  }
  return step(prompt);
}

Tensor EncoderDecoderDecoder::step(const Tensor& tokens) {
  NoGradGuard no_grad;
  const AttentionForwardOptions cross = AttentionForwardOptions().key_padding_mask(row_padding_);
  return model_->decode(tokens, memory_, {}, cross, &cache_).output.select(1, -1);
}

void EncoderDecoderDecoder::reorder(const Tensor& rows) {
  cache_.reorder(rows);
  memory_ = index_select(memory_, 0, rows);
  if (row_padding_.defined()) row_padding_ = index_select(row_padding_, 0, rows);
}

double gnmt_length_penalty(std::int64_t length, double alpha) {
  return std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

std::vector<std::vector<Hypothesis>> beam_search(Decoder& decoder, const Tensor& prompt,
                                                 const BeamSearchOptions& options) {
  const std::int64_t k = options.beam_size;
  if (k < 1 || options.max_new_tokens < 1 || options.num_return < 1 || options.num_return > k)
    throw ValueError("beam_search: beam_size and max_new_tokens must be >= 1 and num_return in [1, beam_size], got " +
                     std::to_string(k) + ", " + std::to_string(options.max_new_tokens) + " and " +
                     std::to_string(options.num_return));
  if (prompt.dim() != 2 || prompt.shape()[1] == 0 || prompt.dtype() != kInt64)
    throw ShapeError("beam_search: expected an Int64 prompt (B, T) with T >= 1, got " + prompt.shape().str());
  NoGradGuard no_grad;
  const std::int64_t batch = prompt.shape()[0];
  const std::int64_t rows = batch * k;
  std::vector<std::int64_t> repeat(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) repeat[static_cast<std::size_t>(r)] = r / k;
  Tensor logits = decoder.start(index_select(prompt, 0, from_vector(repeat, {rows})));
  const bool with_coverage = options.coverage_penalty != 0.0;
  // The attention behind the current logits, (rows, S) flattened; each row's padding flags.
  std::vector<double> attention;
  std::vector<std::vector<std::int64_t>> padding(static_cast<std::size_t>(rows));
  std::int64_t source = 0;
  auto read_attention = [&] {
    const Tensor a = decoder.attention();
    if (!a.defined() || a.dim() != 2 || a.shape()[0] != rows)
      throw ValueError("beam_search: the coverage penalty needs the decoder's attention (" + std::to_string(rows) +
                       ", S); this decoder gives " + (a.defined() ? a.shape().str() : std::string("none")));
    source = a.shape()[1];
    attention = a.to(kFloat64).to_vector<double>();
  };
  if (with_coverage) {
    read_attention();
    const Tensor pad = decoder.source_padding();
    if (pad.defined()) {
      const std::vector<std::int64_t> flags = pad.to(kInt64).to_vector<std::int64_t>();
      for (std::int64_t r = 0; r < rows; ++r)
        padding[static_cast<std::size_t>(r)].assign(flags.begin() + r * source, flags.begin() + (r + 1) * source);
    }
  }
  // A hypothesis' score: log_prob / lp(length), plus the coverage penalty.
  auto score_of = [&](double log_prob, std::size_t length, const std::vector<double>& coverage, std::int64_t row) {
    double s = log_prob / gnmt_length_penalty(static_cast<std::int64_t>(length), options.length_penalty);
    if (with_coverage)
      s += coverage_penalty(coverage, padding[static_cast<std::size_t>(row)], options.coverage_penalty);
    return s;
  };

  // Only the first beam of each prompt row is live at first: the others start at -inf.
  std::vector<Beam> beams(static_cast<std::size_t>(rows));
  for (std::int64_t b = 0; b < batch; ++b) beams[static_cast<std::size_t>(b * k)].log_prob = 0.0;
  if (with_coverage)
    for (Beam& beam : beams) beam.coverage.assign(static_cast<std::size_t>(source), 0.0);
  std::vector<std::vector<Hypothesis>> finished(static_cast<std::size_t>(batch));
  std::vector<bool> done(static_cast<std::size_t>(batch), false);
  const double final_penalty = gnmt_length_penalty(options.max_new_tokens, options.length_penalty);

  for (std::int64_t step = 0; step < options.max_new_tokens; ++step) {
    const std::int64_t vocab = logits.shape()[1];
    const std::vector<double> logp = log_softmax(logits.to(kFloat64), -1).to_vector<double>();
    std::vector<Beam> next(static_cast<std::size_t>(rows));
    std::vector<std::int64_t> parents(static_cast<std::size_t>(rows)), tokens(static_cast<std::size_t>(rows), 0);
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::size_t first = static_cast<std::size_t>(b * k);
      for (std::int64_t i = 0; i < k; ++i) parents[first + static_cast<std::size_t>(i)] = b * k;
      if (done[static_cast<std::size_t>(b)]) continue;
      // Every extension of a live beam, best first (ties: lower row, then lower token).
      struct Candidate {
        double log_prob;
        std::int64_t row, token;
      };
      std::vector<Candidate> candidates;
      for (std::int64_t i = 0; i < k; ++i) {
        const std::int64_t row = b * k + i;
        const double base = beams[static_cast<std::size_t>(row)].log_prob;
        if (base == kNegInf) continue;
        for (std::int64_t v = 0; v < vocab; ++v)
          candidates.push_back({base + logp[static_cast<std::size_t>(row * vocab + v)], row, v});
      }
      const std::size_t keep = std::min(candidates.size(), static_cast<std::size_t>(2 * k));
      std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(keep), candidates.end(),
                        [](const Candidate& a, const Candidate& c) {
                          if (a.log_prob != c.log_prob) return a.log_prob > c.log_prob;
                          return a.row != c.row ? a.row < c.row : a.token < c.token;
                        });
      std::int64_t chosen = 0;
      for (std::size_t rank = 0; rank < keep && chosen < k; ++rank) {
        const Candidate& c = candidates[rank];
        if (c.log_prob == kNegInf) break;
        const Beam& parent = beams[static_cast<std::size_t>(c.row)];
        std::vector<std::int64_t> seq = parent.tokens;
        seq.push_back(c.token);
        std::vector<double> coverage = parent.coverage;
        for (std::size_t j = 0; j < coverage.size(); ++j)
          coverage[j] += attention[static_cast<std::size_t>(c.row * source) + j];
        if (options.eos_token && c.token == *options.eos_token) {
          // An end among the beam_size best candidates finishes a hypothesis; further down it cannot
          // beat the beams kept in its place.
          if (rank < static_cast<std::size_t>(k))
            finished[static_cast<std::size_t>(b)].push_back(
                {seq, c.log_prob, score_of(c.log_prob, seq.size(), coverage, c.row), true});
          continue;
        }
        const std::size_t slot = first + static_cast<std::size_t>(chosen++);
        next[slot] = Beam{std::move(seq), c.log_prob, std::move(coverage)};
        parents[slot] = c.row;
        tokens[slot] = c.token;
      }
      // When to stop this row: Early once beam_size hypotheses have finished; Exhaustive once no live
      // beam can beat the worst of the best beam_size finished ones (a log-probability only falls, and
      // with alpha >= 0 the penalty is largest at max_new_tokens, so log_prob / lp(max) bounds its score;
      // the coverage penalty is at most 0).
      std::vector<Hypothesis>& ended = finished[static_cast<std::size_t>(b)];
      if (static_cast<std::int64_t>(ended.size()) >= k) {
        std::sort(ended.begin(), ended.end(),
                  [](const Hypothesis& a, const Hypothesis& c) { return a.score > c.score; });
        bool stop = options.stopping == BeamSearchOptions::Stopping::Early;
        if (!stop) {
          double best_live = kNegInf;
          for (std::int64_t i = 0; i < k; ++i)
            best_live = std::max(best_live, next[first + static_cast<std::size_t>(i)].log_prob);
          const double bound =
              options.length_penalty >= 0 ? best_live / final_penalty : best_live;  // alpha < 0: lp(1) is largest
          stop = bound <= ended[static_cast<std::size_t>(k - 1)].score;
        }
        done[static_cast<std::size_t>(b)] = stop;
      }
    }
    beams = std::move(next);
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; }) || step + 1 == options.max_new_tokens) break;
    decoder.reorder(from_vector(parents, {rows}));
    logits = decoder.step(from_vector(tokens, {rows, 1}));
    if (with_coverage) read_attention();
  }

  std::vector<std::vector<Hypothesis>> out(static_cast<std::size_t>(batch));
  for (std::int64_t b = 0; b < batch; ++b) {
    std::vector<Hypothesis> all = finished[static_cast<std::size_t>(b)];
    if (!done[static_cast<std::size_t>(b)]) {
      for (std::int64_t i = 0; i < k; ++i) {
        const Beam& beam = beams[static_cast<std::size_t>(b * k + i)];
        if (beam.log_prob == kNegInf) continue;
        all.push_back(
            {beam.tokens, beam.log_prob, score_of(beam.log_prob, beam.tokens.size(), beam.coverage, b * k + i), false});
      }
    }
    std::stable_sort(all.begin(), all.end(),
                     [](const Hypothesis& a, const Hypothesis& c) { return a.score > c.score; });
    if (static_cast<std::int64_t>(all.size()) > options.num_return)
      all.resize(static_cast<std::size_t>(options.num_return));
    out[static_cast<std::size_t>(b)] = std::move(all);
  }
  return out;
}

}  // namespace tapegrad::nn
