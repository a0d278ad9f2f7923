#include "tapegrad/nn/decoding.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/format.h"
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

// Keeps, in each row of probs (rows of `vocab`), the smallest set of most likely tokens whose
// probability reaches top_p (ties broken by token id), zeroes the rest and renormalises.
void keep_nucleus(std::vector<double>& probs, std::size_t vocab, double top_p) {
  std::vector<std::size_t> order(vocab);
  for (std::size_t row = 0; row * vocab < probs.size(); ++row) {
    double* p = probs.data() + row * vocab;
    for (std::size_t v = 0; v < vocab; ++v) order[v] = v;
    std::stable_sort(order.begin(), order.end(), [p](std::size_t a, std::size_t b) { return p[a] > p[b]; });
    double mass = 0.0;
    std::size_t kept = 0;
    while (kept < vocab && (kept == 0 || mass < top_p)) mass += p[order[kept++]];
    for (std::size_t i = kept; i < vocab; ++i) p[order[i]] = 0.0;
    for (std::size_t v = 0; v < vocab; ++v) p[v] /= mass;
  }
}

}  // namespace

std::vector<std::int64_t> choose_tokens(const Tensor& logits, const GenerationOptions& options, Generator& gen,
                                        const char* op) {
  detail::check_generation_options(options, op);
  if (logits.dim() != 2 || logits.shape()[1] == 0)
    throw ShapeError(message(op, ": expected logits (R, V) with V >= 1, got shape ", logits.shape().str()));
  NoGradGuard no_grad;
  const Tensor last = logits.to(kFloat64);
  if (options.temperature == 0.0) return argmax(last, -1).to_vector<std::int64_t>();
  const std::int64_t vocab_size = last.shape()[1];
  Tensor scaled = last / options.temperature;
  if (options.top_k > 0 && options.top_k < vocab_size) {
    Tensor threshold = topk(scaled, options.top_k, -1).first.narrow(1, options.top_k - 1, 1);  // (R, 1)
    scaled = masked_fill(scaled, lt(scaled, threshold), kNegInf);
  }
  std::vector<double> probs = softmax(scaled, -1).to_vector<double>();
  const std::size_t vocab = static_cast<std::size_t>(vocab_size);
  for (std::size_t row = 0; row * vocab < probs.size(); ++row)
    for (std::size_t v = 0; v < vocab; ++v)
      if (!std::isfinite(probs[row * vocab + v]))
        throw ValueError(
            message(op, ": row ", row, " of the logits gives no distribution to sample (a NaN, or every logit -inf)"));
  if (options.top_p < 1.0) keep_nucleus(probs, vocab, options.top_p);
  std::vector<std::int64_t> next(static_cast<std::size_t>(last.shape()[0]));
  for (std::size_t b = 0; b < next.size(); ++b) {
    // Inverse-CDF sampling; the last token with non-zero probability absorbs rounding.
    double u = gen.uniform();
    std::size_t chosen = vocab - 1;
    while (chosen > 0 && probs[b * vocab + chosen] == 0.0) --chosen;
    for (std::size_t v = 0; v < vocab; ++v) {
      u -= probs[b * vocab + v];
      if (u < 0) {
        chosen = v;
        break;
      }
    }
    next[b] = static_cast<std::int64_t>(chosen);
  }
  return next;
}

Tensor generate(Decoder& decoder, const Tensor& prompt, const GenerationOptions& options, Generator& gen) {
  if (prompt.dim() != 2 || prompt.dtype() != kInt64 || prompt.shape()[1] == 0)
    throw ShapeError(message("generate: expected an Int64 prompt (R, T) with T >= 1, got ", dtype_name(prompt.dtype()),
                             " ", prompt.shape().str()));
  if (options.max_new_tokens < 0)
    throw ValueError(message("generate: max_new_tokens must be non-negative, got ", options.max_new_tokens));
  if (options.sliding_window)
    throw ValueError(
        "generate: sliding_window is LanguageModel::generate's (it recomputes the model over a window); a Decoder "
        "continues from its own state");
  detail::check_generation_options(options, "generate");
  return detail::generate_tokens(decoder, prompt, options, gen, "generate");
}

namespace detail {

Tensor generate_tokens(Decoder& decoder, const Tensor& prompt, const GenerationOptions& options, Generator& gen,
                       const char* op) {
  NoGradGuard no_grad;
  const std::int64_t rows = prompt.shape()[0];
  Tensor sequence = prompt;
  if (options.max_new_tokens <= 0) return sequence;
  Tensor logits = decoder.start(prompt);
  std::vector<bool> finished(static_cast<std::size_t>(rows), false);
  for (std::int64_t step = 0; step < options.max_new_tokens; ++step) {
    check_decoder_logits(logits, rows, options.eos_token, step, op);
    std::vector<std::int64_t> next = choose_tokens(logits, options, gen, op);
    bool all_done = options.eos_token.has_value();
    for (std::size_t r = 0; r < next.size(); ++r) {
      if (options.eos_token) {
        if (finished[r]) next[r] = *options.eos_token;
        finished[r] = finished[r] || next[r] == *options.eos_token;
      }
      all_done = all_done && finished[r];
    }
    const Tensor tokens = from_vector(next, {rows, 1});
    sequence = concat({sequence, tokens}, 1);
    if (all_done || step + 1 == options.max_new_tokens) break;
    logits = decoder.step(tokens);
  }
  return sequence;
}

}  // namespace detail

Tensor LanguageModelDecoder::start(const Tensor& prompt) {
  cache_ = LanguageModelCache();
  model_->eval();
  return model_->forward(prompt, &cache_).select(1, -1);
}

Tensor LanguageModelDecoder::step(const Tensor& tokens) { return model_->forward(tokens, &cache_).select(1, -1); }

namespace detail {

Tensor source_rows(const char* decoder, std::int64_t rows, std::int64_t sources) {
  if (sources < 1 || rows % sources != 0)
    throw ShapeError(message(decoder, ": ", rows, " prompt rows for ", sources,
                             " sources; the rows must be the sources repeated an equal number of times"));
  const std::int64_t per = rows / sources;
  std::vector<std::int64_t> index(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) index[static_cast<std::size_t>(r)] = r / per;
  return from_vector(index, {rows});
}

void check_generation_options(const GenerationOptions& options, const char* op) {
  if (!(options.temperature >= 0) || !std::isfinite(options.temperature) || options.top_k < 0)
    throw ValueError(message(op, ": temperature must be finite and non-negative and top_k non-negative, got ",
                             options.temperature, " and ", options.top_k));
  if (!(options.top_p > 0.0 && options.top_p <= 1.0))
    throw ValueError(message(op, ": top_p must be in (0, 1], got ", options.top_p));
  if (options.eos_token && *options.eos_token < 0)
    throw ValueError(message(op, ": eos_token must be a token id (>= 0), got ", *options.eos_token));
}

void check_decoder_logits(const Tensor& logits, std::int64_t rows, std::optional<std::int64_t> eos_token,
                          std::int64_t step, const char* op) {
  if (logits.dim() != 2 || logits.shape()[0] != rows || logits.shape()[1] < 1)
    throw ShapeError(message(op, ": the decoder's logits must be (", rows, ", V) with V >= 1 (one row per ",
                             "hypothesis), got ", logits.shape().str(), " at step ", step));
  if (eos_token && *eos_token >= logits.shape()[1])
    throw ValueError(message(op, ": eos_token ", *eos_token, " is outside the decoder's vocabulary of ",
                             logits.shape()[1], " tokens (it could never be emitted)"));
}

}  // namespace detail

EncoderDecoderDecoder::EncoderDecoderDecoder(EncoderDecoder model, Tensor source, Tensor source_padding,
                                             std::int64_t target_length)
    : model_(std::move(model)),
      source_(std::move(source)),
      padding_(std::move(source_padding)),
      target_length_(target_length) {
  if (target_length < 0)
    throw ValueError(
        message("EncoderDecoderDecoder: target_length must be non-negative (0: max_len), got ", target_length));
}

Tensor EncoderDecoderDecoder::start(const Tensor& prompt) {
  NoGradGuard no_grad;
  model_->eval();
  const Tensor rows = detail::source_rows("EncoderDecoderDecoder", prompt.shape()[0], source_.shape()[0]);
  memory_ = index_select(model_->encode(source_, padding_), 0, rows);
  row_padding_ = padding_.defined() ? index_select(padding_, 0, rows) : Tensor();
  attention_ = Tensor();
  cache_ = DecoderCache();
  if (target_length_ > 0 && model_->options().randomized_positions() > 0) {
    // One draw per source, shared by its beams (the rows repeat the sources).
    cache_.positions = index_select(model_->sample_positions(source_.shape()[0], target_length_), 0, rows);
  }
  return step(prompt);
}

Tensor EncoderDecoderDecoder::step(const Tensor& tokens) {
  NoGradGuard no_grad;
  const AttentionForwardOptions cross =
      AttentionForwardOptions().key_padding_mask(row_padding_).need_weights(report_attention_);
  const DecoderResult out = model_->decode(tokens, memory_, {}, cross, &cache_);
  if (report_attention_) attention_ = out.cross_weights.back().mean({1}).select(1, -1);  // (R, H, T, S) -> (R, S)
  return out.output.select(1, -1);
}

void EncoderDecoderDecoder::reorder(const Tensor& rows) {
  cache_.reorder(rows);
  memory_ = index_select(memory_, 0, rows);
  if (row_padding_.defined()) row_padding_ = index_select(row_padding_, 0, rows);
  if (attention_.defined()) attention_ = index_select(attention_, 0, rows);
}

double gnmt_length_penalty(std::int64_t length, double alpha) {
  return std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

std::vector<std::vector<Hypothesis>> beam_search(Decoder& decoder, const Tensor& prompt,
                                                 const BeamSearchOptions& options) {
  const std::int64_t k = options.beam_size;
  if (k < 1 || options.max_new_tokens < 1 || options.num_return < 1 || options.num_return > k)
    throw ValueError(
        message("beam_search: beam_size and max_new_tokens must be >= 1 and num_return in [1, beam_size], got ", k,
                ", ", options.max_new_tokens, " and ", options.num_return));
  // A NaN score would break the ordering every step sorts by.
  if (!std::isfinite(options.length_penalty) || !std::isfinite(options.coverage_penalty))
    throw ValueError(message("beam_search: length_penalty and coverage_penalty must be finite, got ",
                             options.length_penalty, " and ", options.coverage_penalty));
  if (options.eos_token && *options.eos_token < 0)
    throw ValueError(message("beam_search: eos_token must be a token id (>= 0), got ", *options.eos_token));
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
      throw ValueError(message("beam_search: the coverage penalty needs the decoder's attention (", rows,
                               ", S); this decoder gives ", (a.defined() ? a.shape().str() : std::string("none"))));
    // The coverage sums are per source position: S is fixed by the first step's attention.
    if (!attention.empty() && a.shape()[1] != source)
      throw ShapeError(
          message("beam_search: the decoder's attention covered ", source, " source positions, then ", a.shape()[1]));
    source = a.shape()[1];
    attention = a.to(kFloat64).to_vector<double>();
  };
  if (with_coverage) {
    read_attention();
    const Tensor pad = decoder.source_padding();
    if (pad.defined()) {
      if (pad.dim() != 2 || pad.shape()[0] != rows || pad.shape()[1] != source)
        throw ShapeError(message("beam_search: the decoder's source padding must be (", rows, ", ", source,
                                 ") like its attention, got ", pad.shape().str()));
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
    // What a Decoder returns is read row by row below: a wrong shape must not be read out of bounds.
    detail::check_decoder_logits(logits, rows, options.eos_token, step, "beam_search");
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
