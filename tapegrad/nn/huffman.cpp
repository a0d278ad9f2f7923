#include "tapegrad/nn/huffman.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

#include "tapegrad/autograd/error.h"

namespace tapegrad::nn {

HuffmanTree huffman_tree(const std::vector<std::int64_t>& counts) {
  const std::size_t v = counts.size();
  if (v == 0) throw ValueError("huffman_tree: no words");
  std::int64_t total = 0;
  for (std::size_t i = 0; i < v; ++i) {
    if (counts[i] < 1)
      throw ValueError(
          message("huffman_tree: count ", i, " is ", counts[i], "; every word needs a count of at least 1"));
    if (counts[i] > std::numeric_limits<std::int64_t>::max() - total)
      throw ValueError(message("huffman_tree: the counts sum to more than an int64 holds (at count ", i, ")"));
    total += counts[i];
  }
  // order[r]: the word of rank r, most frequent first (the identity for sorted counts).
  std::vector<std::size_t> order(v);
  std::iota(order.begin(), order.end(), 0);
  if (!std::is_sorted(counts.begin(), counts.end(), std::greater<>()))
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return counts[a] > counts[b]; });
  // Nodes 0 .. v - 1 are the leaves by rank, v .. 2v - 2 the inner nodes in order of creation.
  std::vector<std::int64_t> weight(2 * v - 1);
  std::vector<std::size_t> parent(2 * v - 1, 0);
  std::vector<std::uint8_t> branch(2 * v - 1, 0);
  for (std::size_t r = 0; r < v; ++r) weight[r] = counts[order[r]];
  std::size_t leaf = v;   // the smallest unmerged leaf is leaf - 1 (ranks go down in weight)
  std::size_t inner = v;  // the oldest unmerged inner node
  std::size_t next = v;   // the inner node being made
  auto smallest = [&]() {
    if (leaf > 0 && (inner >= next || weight[leaf - 1] < weight[inner])) return --leaf;
    return inner++;
  };
  for (; next < 2 * v - 1; ++next) {
    const std::size_t first = smallest(), second = smallest();
    weight[next] = weight[first] + weight[second];
    parent[first] = parent[second] = next;
    branch[second] = 1;
  }
  HuffmanTree tree;
  tree.nodes.resize(v);
  tree.codes.resize(v);
  const std::size_t root = 2 * v - 2;
  for (std::size_t r = 0; r < v; ++r) {
    std::vector<std::int64_t>& nodes = tree.nodes[order[r]];
    std::vector<std::uint8_t>& codes = tree.codes[order[r]];
    for (std::size_t n = r; n != root; n = parent[n]) {
      codes.push_back(branch[n]);
      nodes.push_back(static_cast<std::int64_t>(parent[n] - v));
    }
    std::reverse(nodes.begin(), nodes.end());
    std::reverse(codes.begin(), codes.end());
  }
  return tree;
}

HuffmanPaths HuffmanTree::paths(const Tensor& words, std::int64_t pad) const {
  if (words.dtype() != kInt64)
    throw TypeError(message("HuffmanTree::paths: expected Int64 words, got ", dtype_name(words.dtype())));
  const Tensor contiguous = words.contiguous();
  const std::int64_t* w = contiguous.data_ptr<std::int64_t>();
  const std::int64_t b = words.numel();
  std::size_t longest = 0;
  for (std::int64_t i = 0; i < b; ++i) {
    if (w[i] < 0 || w[i] >= num_words())
      throw IndexError(message("HuffmanTree::paths: word ", w[i], " at ", i, " is outside [0, ", num_words(), ")"));
    longest = std::max(longest, nodes[static_cast<std::size_t>(w[i])].size());
  }
  const auto l = static_cast<std::int64_t>(longest);
  HuffmanPaths out{full({b, l}, static_cast<double>(pad), kInt64), zeros({b, l}), zeros({b, l}, kBool)};
  std::int64_t* n = out.nodes.data_ptr<std::int64_t>();
  float* c = out.codes.data_ptr<float>();
  bool* m = out.mask.data_ptr<bool>();
  for (std::int64_t i = 0; i < b; ++i) {
    const auto word = static_cast<std::size_t>(w[i]);
    const std::size_t length = nodes[word].size();
    std::copy(nodes[word].begin(), nodes[word].end(), n + i * l);
    std::copy(codes[word].begin(), codes[word].end(), c + i * l);  // 0 and 1, exact in float
    std::fill(m + i * l, m + i * l + static_cast<std::int64_t>(length), true);
  }
  return out;
}

}  // namespace tapegrad::nn
