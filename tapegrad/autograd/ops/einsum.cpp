// einsum: the equation parsed into labels, each operand's repeated labels reduced to diagonals and
// its private labels summed, then the operands contracted left to right, each pair as one batched
// matmul (batch labels, the left operand's kept labels, the contracted labels, the right operand's
// kept labels). Every step is a differentiable op, so the backward, and the backward of the
// backward, come from theirs.

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tapegrad/autograd/ops.h"

namespace tapegrad {

namespace {

// Labels: 'A'-'Z' are 0-25 and 'a'-'z' 26-51 (so sorting labels sorts them as ASCII does, which
// is numpy's order for an implicit output); the axes "..." stands for are 52, 53, ...
constexpr int kLetters = 52;
using Labels = std::vector<int>;

int letter_label(char c) { return c >= 'a' ? 26 + (c - 'a') : c - 'A'; }

char label_char(int label) {
  if (label >= kLetters) return '.';
  return static_cast<char>(label < 26 ? 'A' + label : 'a' + (label - 26));
}

// One side of the equation's term as written: its letters, and where "..." sits among them.
struct Term {
  Labels letters;
  int ellipsis_at = -1;  // index into letters before which "..." stands; -1 when absent
};

class Parser {
 public:
  explicit Parser(const std::string& equation) : equation_(equation) {
    for (char c : equation)
      if (!std::isspace(static_cast<unsigned char>(c))) text_ += c;
  }

  // The input terms and, when the equation has "->", the output term.
  std::pair<std::vector<Term>, std::optional<Term>> parse() const {
    const std::size_t arrow = text_.find("->");
    if (arrow != std::string::npos && text_.find("->", arrow + 2) != std::string::npos) fail("more than one \"->\"");
    const std::string inputs = text_.substr(0, arrow);
    std::vector<Term> terms;
    std::size_t start = 0;
    for (;;) {
      const std::size_t comma = inputs.find(',', start);
      terms.push_back(term(inputs.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (arrow == std::string::npos) return {terms, std::nullopt};
    const std::string output = text_.substr(arrow + 2);
    if (output.find(',') != std::string::npos) fail("the output has a \",\"");
    return {terms, term(output)};
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw ValueError("einsum: equation \"" + equation_ + "\": " + what);
  }

 private:
  Term term(const std::string& text) const {
    Term t;
    for (std::size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      if (c == '.') {
        if (text.compare(i, 3, "...") != 0) fail("a \".\" that is not part of \"...\"");
        if (t.ellipsis_at >= 0) fail("\"...\" twice in \"" + text + "\"");
        t.ellipsis_at = static_cast<int>(t.letters.size());
        i += 2;
      } else if (std::isalpha(static_cast<unsigned char>(c))) {
        t.letters.push_back(letter_label(c));
      } else {
        fail(std::string("'") + c + "' is not a letter, \",\", \"->\" or \"...\"");
      }
    }
    return t;
  }

  std::string equation_;
  std::string text_;
};

std::string labels_str(const Labels& labels) {
  std::string s;
  for (int l : labels) s += label_char(l);
  return s;
}

// A tensor and the label of each of its axes.
struct Labelled {
  Tensor t;
  Labels labels;
};

// Sums away the axes whose labels `keep` rejects.
template <class Keep>
void sum_unless(Labelled& x, Keep keep) {
  Dims axes;
  Labels kept;
  for (int i = 0; i < static_cast<int>(x.labels.size()); ++i) {
    if (keep(x.labels[static_cast<std::size_t>(i)])) kept.push_back(x.labels[static_cast<std::size_t>(i)]);
    else axes.push_back(i);
  }
  if (axes.size() == 0) return;
  x.t = sum(x.t, axes);
  x.labels = kept;
}

// x's axes in the order of `order` (every one of x's labels, once).
Tensor permuted(const Labelled& x, const Labels& order) {
  Dims axes;
  bool identity = true;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto at = std::find(x.labels.begin(), x.labels.end(), order[i]) - x.labels.begin();
    axes.push_back(static_cast<std::int64_t>(at));
    identity = identity && at == static_cast<std::ptrdiff_t>(i);
  }
  return identity ? x.t : permute(x.t, axes);
}

// The sizes of `labels`, and their product.
std::pair<Shape, std::int64_t> sizes_of(const Labels& labels, const std::array<std::int64_t, 128>& size) {
  Shape shape;
  std::int64_t product = 1;
  for (int l : labels) {
    shape.push_back(size[static_cast<std::size_t>(l)]);
    product *= size[static_cast<std::size_t>(l)];
  }
  return {shape, product};
}

}  // namespace

Tensor einsum(const std::string& equation, const TensorList& operands) {
  const Parser parser(equation);
  auto [terms, output_term] = parser.parse();
  if (operands.empty()) parser.fail("no operands");
  if (terms.size() != operands.size())
    parser.fail(std::to_string(terms.size()) + " input terms for " + std::to_string(operands.size()) + " operands");
  for (std::size_t i = 0; i < operands.size(); ++i) {
    if (!operands[i].defined()) parser.fail("operand " + std::to_string(i) + " is undefined");
    if (operands[i].dtype() != operands[0].dtype())
      throw TypeError(message("einsum: equation \"", equation, "\": operand 0 is ", dtype_name(operands[0].dtype()),
                              " but operand ", i, " is ", dtype_name(operands[i].dtype())));
  }

  // Each operand's labels, "..." expanded to the axes it covers there, right-aligned across
  // operands as broadcasting aligns them.
  int ellipsis_rank = 0;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const Term& term = terms[i];
    const int letters = static_cast<int>(term.letters.size()), rank = operands[i].dim();
    if (term.ellipsis_at < 0 ? rank != letters : rank < letters)
      throw ShapeError(message("einsum: equation \"", equation, "\": operand ", i, " has shape ",
                               operands[i].shape().str(), " but its term has ", letters, " labels",
                               (term.ellipsis_at < 0 ? "" : " and \"...\"")));
    if (term.ellipsis_at >= 0) ellipsis_rank = std::max(ellipsis_rank, rank - letters);
  }
  const auto expand_term = [&](const Term& term, int covered) {
    Labels labels(term.letters.begin(), term.letters.end());
    if (term.ellipsis_at < 0) return labels;
    Labels dots;
    for (int j = 0; j < covered; ++j) dots.push_back(kLetters + ellipsis_rank - covered + j);
    labels.insert(labels.begin() + term.ellipsis_at, dots.begin(), dots.end());
    return labels;
  };
  std::vector<Labelled> inputs;
  std::array<std::int64_t, 128> size{};
  std::array<int, 128> uses{};  // how often each label appears over all input terms
  size.fill(-1);
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const int covered = operands[i].dim() - static_cast<int>(terms[i].letters.size());
    Labelled x{operands[i], expand_term(terms[i], terms[i].ellipsis_at < 0 ? 0 : covered)};
    for (std::size_t a = 0; a < x.labels.size(); ++a) {
      const int l = x.labels[a];
      const std::int64_t n = x.t.shape()[static_cast<int>(a)];
      ++uses[static_cast<std::size_t>(l)];
      std::int64_t& known = size[static_cast<std::size_t>(l)];
      if (known == -1 || known == 1) {
        known = std::max(known, n);
      } else if (n != known && n != 1) {
        throw ShapeError(message("einsum: equation \"", equation, "\": label '", std::string(1, label_char(l)),
                                 "' has size ", known, " and size ", n, " (operand ", i, ", shape ", x.t.shape().str(),
                                 ")"));
      }
    }
    inputs.push_back(std::move(x));
  }

  // The output: as written, or the ellipsis axes then the letters used once, in ASCII order.
  Labels output;
  if (output_term) {
    output = expand_term(*output_term, ellipsis_rank);
    for (std::size_t a = 0; a < output.size(); ++a) {
      const int l = output[a];
      if (l < kLetters && uses[static_cast<std::size_t>(l)] == 0)
        parser.fail(std::string("output label '") + label_char(l) + "' is in no input");
      if (std::count(output.begin(), output.end(), l) > 1)
        parser.fail(std::string("output label '") + label_char(l) + "' appears twice");
    }
  } else {
    for (int j = 0; j < ellipsis_rank; ++j) output.push_back(kLetters + j);
    for (int l = 0; l < kLetters; ++l)
      if (uses[static_cast<std::size_t>(l)] == 1) output.push_back(l);
  }
  const auto in_output = [&](int l) { return std::find(output.begin(), output.end(), l) != output.end(); };

  // Per operand: a label repeated in its term becomes the diagonal of those axes, which must have
  // one size; then a label no other operand and not the output has is summed away.
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    Labelled& x = inputs[i];
    for (bool again = true; again;) {
      again = false;
      for (std::size_t p = 0; p < x.labels.size() && !again; ++p)
        for (std::size_t q = p + 1; q < x.labels.size() && !again; ++q) {
          if (x.labels[p] != x.labels[q]) continue;
          const int a = static_cast<int>(p), b = static_cast<int>(q);
          if (x.t.shape()[a] != x.t.shape()[b])
            throw ShapeError(message("einsum: equation \"", equation, "\": label '",
                                     std::string(1, label_char(x.labels[p])), "' is repeated in operand ", i,
                                     " over axes of sizes ", x.t.shape()[a], " and ", x.t.shape()[b]));
          const int l = x.labels[p];
          x.t = diagonal(x.t, 0, a, b);
          x.labels.erase(x.labels.begin() + b);
          x.labels.erase(x.labels.begin() + a);
          x.labels.push_back(l);
          --uses[static_cast<std::size_t>(l)];
          again = true;
        }
    }
    sum_unless(x, [&](int l) { return in_output(l) || uses[static_cast<std::size_t>(l)] > 1; });
  }

  // Left to right: the running result with the next operand. A label both hold is a batch label
  // when the output or a later operand needs it, else it is contracted; a label one side holds is
  // kept when needed later, else summed on that side first.
  Labelled result = inputs[0];
  for (std::size_t k = 1; k < inputs.size(); ++k) {
    Labelled& right = inputs[k];
    const auto needed_later = [&](int l) {
      if (in_output(l)) return true;
      for (std::size_t j = k + 1; j < inputs.size(); ++j)
        if (std::find(inputs[j].labels.begin(), inputs[j].labels.end(), l) != inputs[j].labels.end()) return true;
      return false;
    };
    const auto holds = [](const Labelled& x, int l) {
      return std::find(x.labels.begin(), x.labels.end(), l) != x.labels.end();
    };
    sum_unless(result, [&](int l) { return holds(right, l) || needed_later(l); });
    sum_unless(right, [&](int l) { return holds(result, l) || needed_later(l); });
    Labels batch, left, contracted, kept_right;
    for (int l : result.labels) (holds(right, l) ? (needed_later(l) ? batch : contracted) : left).push_back(l);
    for (int l : right.labels)
      if (!holds(result, l)) kept_right.push_back(l);

    // Size-1 axes of a shared label broadcast to the other side's size.
    const auto full = [&](const Labelled& x, Labels order) {
      Tensor t = permuted(x, order);
      const Shape target = sizes_of(order, size).first;
      return t.shape() == target ? t : expand(t, target);
    };
    Labels left_order = batch, right_order = batch;
    left_order.insert(left_order.end(), left.begin(), left.end());
    left_order.insert(left_order.end(), contracted.begin(), contracted.end());
    right_order.insert(right_order.end(), contracted.begin(), contracted.end());
    right_order.insert(right_order.end(), kept_right.begin(), kept_right.end());
    const auto [batch_shape, nb] = sizes_of(batch, size);
    const std::int64_t nl = sizes_of(left, size).second, nc = sizes_of(contracted, size).second,
                       nr = sizes_of(kept_right, size).second;
    const Tensor a = reshape(full(result, left_order), {nb, nl, nc});  // (batch, left, contracted)
    const Tensor b = reshape(full(right, right_order), {nb, nc, nr});  // (batch, contracted, right)
    const Tensor product = contracted.empty() ? a * b : matmul(a, b);  // (batch, left, right)
    Shape shape = batch_shape;
    for (int l : left) shape.push_back(size[static_cast<std::size_t>(l)]);
    for (int l : kept_right) shape.push_back(size[static_cast<std::size_t>(l)]);
    result.t = reshape(product, shape);
    result.labels = batch;
    result.labels.insert(result.labels.end(), left.begin(), left.end());
    result.labels.insert(result.labels.end(), kept_right.begin(), kept_right.end());
  }
  sum_unless(result, in_output);

  // The output's order; an ellipsis axis no operand covered (an operand shorter than the others)
  // is already broadcast into the result.
  Labels order;
  for (int l : output)
    if (std::find(result.labels.begin(), result.labels.end(), l) != result.labels.end()) order.push_back(l);
  if (order.size() != output.size())
    throw ShapeError("einsum: equation \"" + equation + "\": output labels \"" + labels_str(output) +
                     "\" but the operands give \"" + labels_str(result.labels) + "\"");
  return permuted(result, order);
}

}  // namespace tapegrad
