#pragma once
// The Huffman tree over a vocabulary that hierarchical softmax walks (Morin and Bengio 2005;
// word2vec's hs=1): each word is a leaf, each of the V - 1 inner nodes has an output vector, and a
// word's probability is the product, along its path from the root, of sigmoid(+-h . v_node) (see
// hierarchical_softmax_loss in losses.h). Frequent words get short paths, so a step costs
// O(log V) on average instead of O(V).
//
//   nn::HuffmanTree tree = nn::huffman_tree(counts);           // counts[w] > 0, most frequent first
//   nn::HuffmanPaths p = tree.paths(targets);                 // targets Int64 (B)
//   Tensor nodes = embedding(node_vectors, p.nodes);          // node_vectors (V - 1, D) -> (B, L, D)
//   Tensor loss = nn::hierarchical_softmax_loss(hidden, nodes, p.codes, p.mask);
//
// Built as word2vec.c builds it: with the counts in decreasing order the two smallest subtrees are
// always at the front of two queues (the leaves, and the merged nodes in order of creation), so
// the tree takes O(V); other orders are sorted first (stably). Between a leaf and a merged node of
// equal weight the merged node goes first, as in word2vec.c, so for the same sorted counts the
// paths and codes are word2vec.c's (inner node i here is its point i).

#include <cstdint>
#include <vector>

#include "tapegrad/autograd/tensor.h"

namespace tapegrad::nn {

// A batch of paths, each padded to the longest: nodes Int64 (B, L) (inner node indices, `pad` where
// padded: 0, or a padding row's index for embedding_dot's padding_idx), codes (B, L) float32 (the branch taken at each
// node, 0 or 1), mask Bool (B, L) (true where the path has a node).
struct HuffmanPaths {
  Tensor nodes;
  Tensor codes;
  Tensor mask;
};

struct HuffmanTree {
  // Per word, from the root down: the inner nodes passed (indices in [0, V - 1), the root is
  // V - 2) and the branch taken at each (1: the child merged second, the larger one).
  std::vector<std::vector<std::int64_t>> nodes;
  std::vector<std::vector<std::uint8_t>> codes;

  std::int64_t num_words() const { return static_cast<std::int64_t>(nodes.size()); }
  std::int64_t num_inner_nodes() const { return num_words() > 0 ? num_words() - 1 : 0; }
  // The paths of words (Int64, any shape with B elements, read in order), padded with `pad`.
  // IndexError for a word outside [0, V).
  HuffmanPaths paths(const Tensor& words, std::int64_t pad = 0) const;
};

// ValueError for no words, a count below 1, or counts summing past the int64 range.
HuffmanTree huffman_tree(const std::vector<std::int64_t>& counts);

}  // namespace tapegrad::nn
