#pragma once
// Word vectors in the word2vec formats, as word2vec.c writes them and gensim's
// KeyedVectors.load_word2vec_format / save_word2vec_format read and write them:
//
//   text    "<V> <D>\n", then a line per word: the word, a space, D numbers separated by spaces
//   binary  "<V> <D>\n", then per word: the word, a space, D little-endian float32, "\n"
//
// Words are UTF-8 and may hold any byte but whitespace (a space or a newline would end them early
// when read back). The binary reader also takes files without the newline after each vector
// (gensim writes none) and ignores newlines in front of a word, as gensim's reader does.
//
//   io::save_word2vec("runs/w2v/vectors.txt", words, emb->weight(), io::Word2VecFormat::Text);
//   io::WordVectors wv = io::load_word2vec("vectors.bin", io::Word2VecFormat::Binary);
//   wv.words[i], wv.vectors.select(0, i)          // (V, D) float32
//
// Writes go through io::write_file_atomic (a failed write leaves the file as it was). Reads check
// the header against what follows: a bad count or number, a truncated file, a duplicated word or
// trailing data is an IoError naming the file, the word's index and the values.

#include <string>
#include <vector>

#include "tapegrad/autograd/tensor.h"

namespace tapegrad::io {

enum class Word2VecFormat { Text, Binary };

struct WordVectors {
  std::vector<std::string> words;
  Tensor vectors;  // (V, D) float32, row i the vector of words[i]
};

// Writes words[i] with row i of vectors (V, D), float32 or float64 (binary stores float32; text
// writes each number as the shortest text that reads back as the same float32, or float64).
// ValueError for a count mismatch or an empty, duplicated or whitespace-holding word; ShapeError
// for vectors that are not (V, D) floating point; IoError naming path when it cannot be written.
void save_word2vec(const std::string& path, const std::vector<std::string>& words, const Tensor& vectors,
                   Word2VecFormat format);

// Reads a file save_word2vec, word2vec.c or gensim wrote in the given format.
WordVectors load_word2vec(const std::string& path, Word2VecFormat format);

}  // namespace tapegrad::io
